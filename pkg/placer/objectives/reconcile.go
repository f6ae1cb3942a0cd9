package objectives

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective"
)

// Event reasons, on the objective (the resized pod as its related object).
const (
	EventResized      = "Resized"
	EventScaled       = "Scaled"
	EventResizeFailed = "ResizeFailed"
	EventScaleFailed  = "ScaleFailed"
	actionResize      = "Resize"
	actionScale       = "Scale"
)

// Condition reasons besides the law's and the SizeApplied ones.
const (
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonSourceNotAllowed  = "SourceNotAllowed"
	ReasonMeasured          = "Measured"
	ReasonMeasurementFailed = "MeasurementFailed"
	ReasonTargetMet         = "TargetMet"
	ReasonTargetViolated    = "TargetViolated"
)

// retryPeriod is when an objective whose spec cannot even be read is looked at again (any change
// to it is seen at once through the informer).
const retryPeriod = time.Minute

// Between two periods the loop checks the metric every period/checksPerPeriod, at least
// minCheckInterval apart: a measurement past the target (or pods that do not answer) starts the
// next period at once, so a service the load outgrew grows within seconds instead of at the end
// of the period. A check decides nothing and writes nothing; none runs within a period of a size
// change, while the metric still shows the size before it.
const (
	checksPerPeriod  = 5
	minCheckInterval = time.Second
)

// reconcileKey runs one period of the objective named key, or a check of it between periods, and
// returns when it is next due.
func (c *Controller) reconcileKey(ctx context.Context, key string) time.Time {
	now := time.Now()
	obj, err := c.objects.Get(key)
	if err != nil {
		return now.Add(retryPeriod)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return now.Add(retryPeriod)
	}
	c.mu.Lock()
	pace := c.pace[key]
	c.mu.Unlock()
	if now.Before(pace.period) {
		violated, wait := c.check(ctx, u, now, pace)
		if !violated {
			return nextCheck(now, wait, pace.period)
		}
	}
	return c.runPeriod(ctx, u.DeepCopy(), now)
}

// pace is when an objective's next period is due, until when its last size change keeps checks
// off, and the target's pods the period read: the checks scrape those, so that a check makes no
// API call (a pod gone since refuses the scrape and is left out, as in a period; when none of
// them answers, the check finds nothing and the period, due within one period, reads the target
// again).
type pace struct {
	period, quietUntil time.Time
	pods               []*corev1.Pod
}

// runPeriod runs one period of u at now, records its pace and returns when the objective is next
// due: its next check, or its next period when no check comes before it.
func (c *Controller) runPeriod(ctx context.Context, u *unstructured.Unstructured, now time.Time) time.Time {
	period, ran := c.reconcile(ctx, u, now)
	p := pace{period: now.Add(period), pods: ran.pods}
	if ran.resized {
		p.quietUntil = p.period
	}
	c.mu.Lock()
	c.pace[keyOf(u)] = p
	c.mu.Unlock()
	return nextCheck(now, checkInterval(period), p.period)
}

// nextCheck is now+wait, or the next period when that comes first or wait is 0 (no check).
func nextCheck(now time.Time, wait time.Duration, period time.Time) time.Time {
	if at := now.Add(wait); wait > 0 && at.Before(period) {
		return at
	}
	return period
}

// checkInterval is the time between two checks in a period.
func checkInterval(period time.Duration) time.Duration {
	return max(period/checksPerPeriod, minCheckInterval)
}

// check measures the metric of u between two periods, from the pods the last period read:
// violated says the measurement is past the target or the pods did not answer in time; wait is the time to the next check (0: none before
// the next period).
func (c *Controller) check(ctx context.Context, u *unstructured.Unstructured, now time.Time, p pace) (violated bool, wait time.Duration) {
	var obj v1alpha1.ServiceObjective
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return false, 0
	}
	v1alpha1.SetServiceObjectiveDefaults(&obj.Spec)
	if len(v1alpha1.ValidateServiceObjective(&obj)) > 0 {
		return false, 0
	}
	wait = checkInterval(time.Duration(obj.Spec.PeriodSeconds) * time.Second)
	if now.Before(p.quietUntil) {
		return false, wait
	}
	if q := obj.Spec.Metric.Source.Query; q != nil && !c.queryAllowed(q.URL) {
		return false, 0
	}
	measured, _, err := c.measureMetric(ctx, &obj, p.pods, now)
	if errors.Is(err, errUnresponsive) {
		return true, wait
	}
	if err != nil {
		return false, wait
	}
	policy := objective.PolicyFor(&obj.Spec)
	return policy.Violated(measured), wait
}

// reconcile runs one period of the objective u at now and returns the time to the next, and
// what the period leaves for the checks after it: it reads and checks the objective, and when it
// is valid measures, decides and applies (step); then it writes the status.
func (c *Controller) reconcile(ctx context.Context, u *unstructured.Unstructured, now time.Time) (period time.Duration, ran stepped) {
	var obj v1alpha1.ServiceObjective
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		c.log.Error("unreadable service objective", "objective", keyOf(u), "err", err)
		return retryPeriod, stepped{}
	}
	v1alpha1.SetServiceObjectiveDefaults(&obj.Spec)
	st := obj.Status.DeepCopy()
	st.ObservedGeneration = obj.Generation
	errs := v1alpha1.ValidateServiceObjective(&obj)
	valid := v1alpha1.ServiceObjectiveValidity(&obj, errs)
	if q := obj.Spec.Metric.Source.Query; len(errs) == 0 && q != nil && !c.queryAllowed(q.URL) {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, ReasonSourceNotAllowed, sourceNotAllowed(&obj)
	}
	meta.SetStatusCondition(&st.Conditions, valid)
	period = retryPeriod
	if len(errs) == 0 {
		period = time.Duration(obj.Spec.PeriodSeconds) * time.Second
	}
	if valid.Status == metav1.ConditionTrue {
		ran = c.step(ctx, u, &obj, st, now)
	}
	if err := c.writeStatus(ctx, u, st); err != nil {
		c.log.Error("could not write the status of a service objective", "objective", keyOf(u), "err", err)
	}
	return period, ran
}

// stepped is what a period leaves for the checks after it: whether it changed the size, and the
// target's pods it read.
type stepped struct {
	resized bool
	pods    []*corev1.Pod
}

// step is one period of a valid objective:
//  1. read the target and the pods it controls;
//  2. read the metric;
//  3. the current size (the last decided one, or the starting size) and the law's history from
//     the status; the pods' resize state says whether they can grow in place;
//  4. decide;
//  5. resize the pods and scale the target to the decided size;
//  6. record the decision in the status, events and metrics.
//
// It returns the target's pods and whether the decided size differs from the last one.
func (c *Controller) step(ctx context.Context, u *unstructured.Unstructured, obj *v1alpha1.ServiceObjective, st *v1alpha1.ServiceObjectiveStatus, now time.Time) stepped {
	key := obj.Namespace + "/" + obj.Name
	policy := objective.PolicyFor(&obj.Spec)
	c.metrics.Target.WithLabelValues(obj.Namespace, obj.Name).Set(policy.Target)

	// 1. The target.
	t, err := c.readTarget(ctx, obj)
	if err != nil {
		reason := ReasonTargetNotFound
		if !apierrors.IsNotFound(err) {
			reason = ReasonTargetUnreadable
		}
		setCondition(st, obj, v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, reason, err.Error())
		return stepped{}
	}

	// 2. The metric.
	measured, note, merr := c.measureMetric(ctx, obj, t.pods, now)
	unresponsive := errors.Is(merr, errUnresponsive)
	switch {
	case unresponsive:
		setCondition(st, obj, v1alpha1.ObjectiveMeasured, metav1.ConditionFalse, objective.ReasonUnresponsive,
			merr.Error()+"; counted as a violation")
		worst := math.Inf(1)
		if policy.AtLeast {
			worst = 0
		}
		c.countViolation(obj, st, policy, worst, now)
	case merr != nil:
		setCondition(st, obj, v1alpha1.ObjectiveMeasured, metav1.ConditionFalse, ReasonMeasurementFailed, merr.Error())
	default:
		setCondition(st, obj, v1alpha1.ObjectiveMeasured, metav1.ConditionTrue, ReasonMeasured, fmt.Sprintf("%s %v %s", metricName(obj), measured, note))
		c.countViolation(obj, st, policy, measured, now)
		q := quantity(measured)
		st.LastMeasurement, st.LastMeasurementTime = &q, &metav1.Time{Time: now}
		c.metrics.Measured.WithLabelValues(obj.Namespace, obj.Name).Set(measured)
	}

	// 3. The current size, history and in-place state.
	cur := currentSize(st, policy, t)
	blocked := inPlace(t.pods, c.resizeServed)
	if blocked.blocked {
		cur.CPUMilli = min(cur.CPUMilli, max(blocked.cpuMilli, policy.Bounds.Min.CPUMilli))
		cur.MemoryBytes = min(cur.MemoryBytes, max(blocked.memory, policy.Bounds.Min.MemoryBytes))
	}
	hist := historyFrom(st.History)

	// 4. Decide.
	d, next := objective.Decide(policy, hist, objective.Input{Current: cur, Measured: measured, InPlaceBlocked: blocked.blocked, Unresponsive: unresponsive})
	c.log.Debug("service objective decided", "objective", key, "measured", measured, "smoothed", d.Smoothed,
		"pressure", d.Pressure, "decision", d.Action, "reason", d.Reason, "size", d.Size.String(), "inPlaceBlocked", blocked.blocked)

	// 5. Apply.
	applied := c.apply(ctx, u, t, d.Size, blocked)
	setCondition(st, obj, v1alpha1.ObjectiveSizeApplied, applied.status, applied.reason, applied.message)

	// 6. Record.
	resized := d.Size != sizeOf(st)
	if resized {
		st.LastResizeTime = &metav1.Time{Time: now}
	}
	setSize(st, d.Size)
	st.History = historyTo(next)
	st.LastDecision, st.LastDecisionReason = string(d.Action), d.Reason
	if !math.IsNaN(d.Smoothed) {
		q := quantity(d.Smoothed)
		st.Smoothed = &q
		c.metrics.Smoothed.WithLabelValues(obj.Namespace, obj.Name).Set(d.Smoothed)
		if d.Met() {
			setCondition(st, obj, v1alpha1.ObjectiveMet, metav1.ConditionTrue, ReasonTargetMet,
				fmt.Sprintf("smoothed %s %v against the target %s (%s)", metricName(obj), d.Smoothed, obj.Spec.Metric.Target.String(), obj.Spec.Metric.Direction))
		} else {
			setCondition(st, obj, v1alpha1.ObjectiveMet, metav1.ConditionFalse, ReasonTargetViolated,
				fmt.Sprintf("smoothed %s %v against the target %s (%s); decision %s (%s): %s", metricName(obj), d.Smoothed,
					obj.Spec.Metric.Target.String(), obj.Spec.Metric.Direction, d.Action, d.Reason, d.Size))
		}
	} else if unresponsive {
		setCondition(st, obj, v1alpha1.ObjectiveMet, metav1.ConditionFalse, ReasonTargetViolated,
			fmt.Sprintf("the pods did not answer %s in time; decision %s (%s): %s", metricName(obj), d.Action, d.Reason, d.Size))
	} else if merr != nil {
		setCondition(st, obj, v1alpha1.ObjectiveMet, metav1.ConditionUnknown, objective.ReasonNoMeasurement, "the metric could not be read this period: the size holds")
	}
	c.metrics.PodCPU.WithLabelValues(obj.Namespace, obj.Name).Set(float64(d.Size.CPUMilli) / 1000)
	c.metrics.Replicas.WithLabelValues(obj.Namespace, obj.Name).Set(float64(d.Size.Replicas))
	return stepped{resized: resized, pods: t.pods}
}

// countViolation adds to the violation seconds when the measurement is on the wrong side of the
// target: the time since the last measurement (the period for the first), at most two periods.
func (c *Controller) countViolation(obj *v1alpha1.ServiceObjective, st *v1alpha1.ServiceObjectiveStatus, p objective.Policy, measured float64, now time.Time) {
	violated := measured > p.Target
	if p.AtLeast {
		violated = measured < p.Target
	}
	if !violated {
		return
	}
	period := time.Duration(obj.Spec.PeriodSeconds) * time.Second
	elapsed := period
	if last := st.LastMeasurementTime; last != nil && now.After(last.Time) {
		elapsed = min(now.Sub(last.Time), 2*period)
	}
	c.metrics.ViolationSeconds.WithLabelValues(obj.Namespace, obj.Name).Add(elapsed.Seconds())
}

// blockedState is the pods' in-place state summed up: blocked when any pod cannot grow in place,
// with the smallest CPU and memory such a pod runs with.
type blockedState struct {
	blocked          bool
	reason, message  string
	cpuMilli, memory int64
}

func inPlace(pods []*corev1.Pod, resizeServed bool) blockedState {
	var b blockedState
	for _, p := range pods {
		s := stateOf(p)
		if !resizeServed {
			s = podState{blocked: true, reason: ReasonResizeUnavailable,
				message: "the API server does not serve pods/resize (in-place pod resize, feature gate InPlacePodVerticalScaling): the service grows and shrinks by replicas only"}
			if len(p.Spec.Containers) > 0 {
				l := p.Spec.Containers[0].Resources.Limits
				s.cpuMilli, s.memory = l.Cpu().MilliValue(), l.Memory().Value()
			}
		}
		if !s.blocked {
			continue
		}
		if !b.blocked || s.cpuMilli < b.cpuMilli {
			b.cpuMilli = s.cpuMilli
		}
		if !b.blocked || s.memory < b.memory {
			b.memory = s.memory
		}
		if !b.blocked {
			b.reason, b.message = s.reason, s.message
		}
		b.blocked = true
	}
	return b
}

// applied is the outcome of apply: the SizeApplied condition.
type applied struct {
	status          metav1.ConditionStatus
	reason, message string
}

// apply gives the target's running pods the decided size in place (all but those that cannot be
// resized: blocked reports them) and the target the decided replicas, and records an event for
// each change. Pods not yet running get their size once they run.
func (c *Controller) apply(ctx context.Context, u *unstructured.Unstructured, t *target, size objective.Size, blocked blockedState) applied {
	out := applied{status: metav1.ConditionTrue, reason: ReasonApplied,
		message: fmt.Sprintf("%s %s has the decided size %s", t.kind, t.name, size)}
	fail := func(reason, msg string) {
		if out.status == metav1.ConditionTrue {
			out = applied{status: metav1.ConditionFalse, reason: reason, message: msg}
		}
	}
	key := t.namespace + "/" + u.GetName()
	if blocked.blocked {
		fail(blocked.reason, blocked.message)
	}
	for _, p := range t.pods {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || len(p.Spec.Containers) == 0 {
			fail(ReasonScaling, fmt.Sprintf("pod %s is not running yet", p.Name))
			continue
		}
		s := stateOf(p)
		if s.reason == ReasonPodsNotGuaranteed || s.reason == ReasonResizeUnavailable || !c.resizeServed {
			continue
		}
		cpu, memory := wanted(p, size)
		if !needsResize(p, cpu, memory) {
			if s.reason != "" {
				fail(s.reason, s.message)
			}
			continue
		}
		if err := c.resizePod(ctx, p, cpu, memory); err != nil {
			fail(ReasonResizeFailed, err.Error())
			c.recorder.Eventf(u, p, corev1.EventTypeWarning, EventResizeFailed, actionResize, "%s", err.Error())
			continue
		}
		old := p.Spec.Containers[0].Resources.Limits
		c.metrics.Resizes.WithLabelValues(t.namespace, u.GetName(), "pod").Inc()
		c.recorder.Eventf(u, p, corev1.EventTypeNormal, EventResized, actionResize,
			"resized pod %s in place to %s CPU and %s memory (from %s and %s) for objective %s",
			p.Name, cpu.String(), memory.String(), old.Cpu().String(), old.Memory().String(), key)
		fail(ReasonResizeInProgress, fmt.Sprintf("pod %s is being resized to %s CPU and %s memory", p.Name, cpu.String(), memory.String()))
	}
	changed, err := c.scale(ctx, t, size.Replicas)
	switch {
	case err != nil:
		out = applied{status: metav1.ConditionFalse, reason: ReasonScaleFailed, message: err.Error()}
		c.recorder.Eventf(u, nil, corev1.EventTypeWarning, EventScaleFailed, actionScale, "%s", err.Error())
	case changed:
		c.metrics.Resizes.WithLabelValues(t.namespace, u.GetName(), "replicas").Inc()
		c.recorder.Eventf(u, nil, corev1.EventTypeNormal, EventScaled, actionScale,
			"scaled %s %s from %d to %d replicas for objective %s", t.kind, t.name, t.replicas, size.Replicas, key)
		fail(ReasonScaling, fmt.Sprintf("%s %s is scaling from %d to %d replicas", t.kind, t.name, t.replicas, size.Replicas))
	case int32(len(t.pods)) != size.Replicas:
		fail(ReasonScaling, fmt.Sprintf("%s %s has %d pods, %d decided", t.kind, t.name, len(t.pods), size.Replicas))
	}
	return out
}

// currentSize is the size last decided (the status), or for a service without one the starting
// size with the target's replicas, within the bounds.
func currentSize(st *v1alpha1.ServiceObjectiveStatus, p objective.Policy, t *target) objective.Size {
	if st.PodSize != nil && st.Replicas > 0 {
		return sizeOf(st)
	}
	s := objective.Start(p.Bounds)
	s.Replicas = max(p.Bounds.Min.Replicas, min(t.replicas, p.Bounds.Max.Replicas))
	return s
}

// sizeOf is the size the status records (zero without one).
func sizeOf(st *v1alpha1.ServiceObjectiveStatus) objective.Size {
	if st.PodSize == nil {
		return objective.Size{}
	}
	return objective.Size{
		Replicas:         st.Replicas,
		CPUMilli:         st.PodSize.CPU.MilliValue(),
		MemoryBytes:      st.PodSize.Memory.Value(),
		IOBytesPerSecond: st.PodSize.IOBandwidth.Value(),
	}
}

func setSize(st *v1alpha1.ServiceObjectiveStatus, s objective.Size) {
	st.Replicas = s.Replicas
	st.PodSize = &v1alpha1.PodSize{
		CPU:         *resource.NewMilliQuantity(s.CPUMilli, resource.DecimalSI),
		Memory:      *resource.NewQuantity(s.MemoryBytes, resource.BinarySI),
		IOBandwidth: *resource.NewQuantity(s.IOBytesPerSecond, resource.DecimalSI),
	}
}

// setCondition sets a condition of the objective's status, keeping its transition time while its
// status stays.
func setCondition(st *v1alpha1.ServiceObjectiveStatus, obj *v1alpha1.ServiceObjective, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: obj.Generation,
	})
}

// maxMessage bounds a condition's message (the API server allows 32768 bytes).
const maxMessage = 4096

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

func metricName(obj *v1alpha1.ServiceObjective) string {
	if p := obj.Spec.Metric.Source.Pods; p != nil {
		return p.Metric
	}
	return "query"
}

func keyOf(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }
