package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// ConditionRescaling is True while a rescale of a job with a rescale hook is under way, and False
// once it ended: acknowledged, or not (the job kept its size, and the message says why).
const ConditionRescaling = "Rescaling"

// The rescale protocol's steps, as condition reasons and events.
const (
	ReasonRescaling           = "Rescaling"
	ReasonRescaleHookCalled   = "RescaleHookCalled"
	ReasonRescaleAcknowledged = "RescaleAcknowledged"
	ReasonRescaleTimeout      = "RescaleTimeout"
	ReasonRescaleFailed       = "RescaleFailed"
	ReasonRescaleInterrupted  = "RescaleInterrupted"
)

const rescalePrefix = "rescale "

// rescaleKey keys a job's rescale in inflight.
func rescaleKey(ns, name string) string { return rescalePrefix + snapshot.HPCJobKey(ns, name) }

// rescale is one run of the rescale protocol for a job with a rescale hook, in the background:
//   - shrink: publish the hostfile of the workers that stay, call the hook; once it acknowledged,
//     the loop deletes the leaving workers (finishRescale);
//   - expand: the new workers are bound already; wait for them to be Ready, publish the hostfile
//     of all workers, call the hook.
//
// A step that fails or times out (the hook's timeoutSeconds, for the readiness wait and for the
// acknowledgement each) puts the previous hostfile back; the loop then keeps the job at its size
// and deletes the new workers of a growth.
type rescale struct {
	job      *v1alpha1.HPCJob
	jobObj   *unstructured.Unstructured
	launcher *corev1.Pod
	request  v1alpha1.RescaleRequest
	// hostfile is the ConfigMap after the rescale, previous the one before.
	hostfile, previous *corev1.ConfigMap
	// leaving are a shrink's departing workers, fresh a growth's new ones (with their UIDs).
	leaving, fresh []*corev1.Pod
	// beneficiary names the gang a shrink makes room for.
	beneficiary string

	// err is why the rescale did not go through; failed says which step: ready, hostfile or hook.
	err      error
	failed   string
	timedOut bool
}

// newRescale describes a rescale of a job from the workers before to those after, in rank order.
func newRescale(job *v1alpha1.HPCJob, u *unstructured.Unstructured, launcher *corev1.Pod, direction string, before, after []*corev1.Pod) *rescale {
	workersOf := func(pods []*corev1.Pod) []hpcjob.Worker {
		ws := make([]hpcjob.Worker, len(pods))
		for i, p := range pods {
			ws[i] = hpcjob.WorkerOf(job, p)
		}
		return ws
	}
	ws := workersOf(after)
	r := &rescale{job: job, jobObj: u, launcher: launcher,
		hostfile: hpcjob.HostfileConfigMap(job, ws), previous: hpcjob.HostfileConfigMap(job, workersOf(before))}
	r.request = v1alpha1.RescaleRequest{Job: job.Namespace + "/" + job.Name, Direction: direction,
		FromWorkers: int32(len(before)), ToWorkers: int32(len(after)), Hostfile: r.hostfile.Data[mpi.HostfileKey]}
	for _, w := range ws {
		r.request.Workers = append(r.request.Workers, w.Hostname)
	}
	return r
}

func (r *rescale) timeout() time.Duration {
	return time.Duration(r.job.Spec.Elastic.RescaleHook.TimeoutSeconds) * time.Second
}

// hookName says which hook a rescale calls, for events.
func (r *rescale) hookName() string {
	if h := r.job.Spec.Elastic.RescaleHook.HTTP; h != nil {
		return fmt.Sprintf("POST %s:%d%s", r.launcher.Status.PodIP, h.Port, h.Path)
	}
	return fmt.Sprintf("exec %q in %s", r.job.Spec.Elastic.RescaleHook.Exec.Command, r.launcher.Name)
}

func (r *rescale) what() string {
	return fmt.Sprintf("%s from %d to %d workers", r.request.Direction, r.request.FromWorkers, r.request.ToWorkers)
}

// startRescale runs a rescale in the background; the loop finishes it (finishRescale).
func (c *Controller) startRescale(ctx context.Context, r *rescale, now time.Time) {
	c.start(ctx, &bindOp{key: rescaleKey(r.job.Namespace, r.job.Name), kind: opRescale, job: r.job, jobObj: r.jobObj, rescale: r, started: now})
}

// startGrowth goes on with an elastic growth once its new workers are bound.
func (c *Controller) startGrowth(ctx context.Context, op *bindOp, now time.Time) {
	r := op.growth
	uids := map[string]*target{}
	for _, t := range op.targets {
		uids[t.pod.Name] = t
	}
	for i, p := range r.fresh {
		p = p.DeepCopy()
		p.UID = uids[p.Name].uid
		r.fresh[i] = p
	}
	c.event(op.jobObj, false, ReasonRescaling, "bound %d new workers; waiting up to %s for them to be Ready", len(r.fresh), r.timeout())
	c.startRescale(ctx, r, now)
}

// runRescale makes the rescale's calls (in the background).
func (c *Controller) runRescale(ctx context.Context, r *rescale) {
	if len(r.fresh) > 0 {
		wctx, cancel := context.WithTimeout(ctx, r.timeout())
		err := c.waitReady(wctx, r.fresh)
		cancel()
		if err != nil {
			r.err, r.failed, r.timedOut = err, "ready", errors.Is(wctx.Err(), context.DeadlineExceeded)
			return
		}
	}
	body, err := json.Marshal(r.request)
	if err == nil {
		err = c.applyConfigMap(ctx, r.job, r.hostfile)
	}
	if err != nil {
		r.err, r.failed = err, "hostfile"
		return
	}
	c.event(r.jobObj, false, ReasonRescaleHookCalled, "published the hostfile of %d workers; calling the rescale hook (%s): %s",
		r.request.ToWorkers, r.hookName(), r.what())
	hctx, cancel := context.WithTimeout(ctx, r.timeout())
	err = c.opts.Hooks.Call(hctx, r.launcher, r.job.Spec.Elastic.RescaleHook, body)
	r.timedOut = errors.Is(hctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		r.err, r.failed = err, "hook"
		if rerr := c.applyConfigMap(ctx, r.job, r.previous); rerr != nil {
			c.log.Warn("restoring the hostfile after a failed rescale failed", "job", r.request.Job, "err", rerr)
		}
		return
	}
	c.event(r.jobObj, false, ReasonRescaleAcknowledged, "the rescale hook acknowledged: %s", r.what())
}

// waitReady waits for pods to be Ready; a pod that fails or goes ends the wait (one the informer
// does not show yet is not Ready).
func (c *Controller) waitReady(ctx context.Context, pods []*corev1.Pod) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := 0
		for _, want := range pods {
			p, err := c.pods.Pods(want.Namespace).Get(want.Name)
			switch {
			case err != nil:
			case p.UID != want.UID || p.DeletionTimestamp != nil:
				return fmt.Errorf("new worker %s went away", want.Name)
			case podFailure(p) != "" && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded):
				return fmt.Errorf("new worker %s ended: %s", want.Name, podFailure(p))
			case podReady(p):
				ready++
			}
		}
		if ready == len(pods) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d new workers Ready", ready, len(pods))
		case <-tick.C:
		}
	}
}

// finishRescale ends a rescale on the loop. Acknowledged: the status takes the new size (and a
// shrink's leaving workers are deleted). Not: the job keeps its size, a growth's new workers are
// deleted, and the Rescaling condition says why; either way the rescale gap starts again.
func (c *Controller) finishRescale(ctx context.Context, op *bindOp) {
	r := op.rescale
	if ctx.Err() != nil {
		// The placer is stopping or lost its lease in the middle of the rescale, whose wait
		// ended for that reason and not on the job's account: nothing more is written or
		// deleted here. The next leader finds Rescaling True and rolls it back
		// (interruptedRescale).
		delete(c.shrinks, op.key)
		return
	}
	ns, name := r.job.Namespace, r.job.Name
	u, job, st, running := c.runningJob(ns, name)
	zero := int64(0)
	if !running || job.UID != r.job.UID {
		delete(c.shrinks, op.key)
		if len(r.fresh) > 0 {
			c.deletePods(ctx, r.job, r.fresh, &zero)
		}
		return
	}
	now := time.Now()
	st.LastRescaleTime = &metav1.Time{Time: now}
	from, to := r.request.FromWorkers, r.request.ToWorkers
	if r.err != nil {
		delete(c.shrinks, op.key)
		reason, msg := ReasonRescaleFailed, ""
		switch {
		case r.failed == "ready" && r.timedOut:
			reason, msg = ReasonRescaleTimeout, fmt.Sprintf("the new workers were not Ready within %s", r.timeout())
		case r.failed == "ready":
			msg = "a new worker did not start"
		case r.failed == "hostfile":
			msg = "the new hostfile could not be published"
		case r.timedOut:
			reason, msg = ReasonRescaleTimeout, fmt.Sprintf("the rescale hook did not acknowledge within %s", r.timeout())
		default:
			msg = "the rescale hook refused"
		}
		msg = fmt.Sprintf("%s (%s)", msg, r.what())
		msg = fmt.Sprintf("%s: %v; the job keeps its %d workers", msg, r.err, from)
		if len(r.fresh) > 0 {
			gone := map[string]bool{}
			for _, p := range r.fresh {
				gone[p.Name] = true
			}
			st.Placements = slices.DeleteFunc(st.Placements, func(p v1alpha1.WorkerPlacement) bool { return gone[p.Worker] })
			st.Nodes = int32(distinctNodes(st.Placements))
			c.deletePods(ctx, job, r.fresh, &zero)
		}
		setCondition(st, ConditionRescaling, metav1.ConditionFalse, reason, msg)
		c.writeStatus(ctx, u, st)
		c.event(u, true, reason, "%s", msg)
		c.log.Info("rescale not acknowledged", "job", ns+"/"+name, "direction", r.request.Direction, "err", r.err)
		c.markDirty(ns + "/" + name)
		return
	}
	msg := fmt.Sprintf("expanded from %d to %d workers", from, to)
	if len(r.leaving) > 0 {
		leaving := map[string]bool{}
		for _, p := range r.leaving {
			leaving[p.Name] = true
		}
		st.Placements = slices.DeleteFunc(st.Placements, func(p v1alpha1.WorkerPlacement) bool { return leaving[p.Worker] })
		st.Nodes = int32(distinctNodes(st.Placements))
		msg = fmt.Sprintf("shrunk from %d to %d workers so that %s fits", from, to, r.beneficiary)
	}
	st.Workers = to
	setCondition(st, ConditionRescaling, metav1.ConditionFalse, ReasonRescaleAcknowledged, "the rescale hook acknowledged: "+r.what())
	setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonRescaled, msg)
	c.writeStatus(ctx, u, st)
	c.deletePods(ctx, job, r.leaving, nil)
	c.event(u, false, ReasonRescaled, "%s", msg)
	c.metrics.Rescales.WithLabelValues(r.request.Direction).Inc()
	c.log.Info("elastic job rescaled", "job", ns+"/"+name, "from", from, "to", to)
	c.markDirty(ns + "/" + name)
}

// interruptedRescale rolls back a rescale that a restart of the placer (or a new leader) cut
// short: the Rescaling condition is True, yet no rescale is under way — only the placer that
// started it knew its steps. The job keeps the size its status gives: a growth's new workers (the
// highest-numbered, beyond that size) are deleted, the hostfile of the job's workers is published
// again, and Rescaling turns False with RescaleInterrupted. It reports whether it found one.
func (c *Controller) interruptedRescale(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, now time.Time) bool {
	if !meta.IsStatusConditionTrue(st.Conditions, ConditionRescaling) {
		return false
	}
	workers, _ := c.liveWorkers(job, now)
	keep, extra := workers, []*corev1.Pod(nil)
	if n := int(st.Workers); len(workers) > n {
		keep, extra = workers[:n], workers[n:]
	}
	gone := map[string]bool{}
	for _, p := range extra {
		gone[p.Name] = true
	}
	st.Placements = slices.DeleteFunc(st.Placements, func(p v1alpha1.WorkerPlacement) bool { return gone[p.Worker] })
	st.Nodes = int32(distinctNodes(st.Placements))
	ws := make([]hpcjob.Worker, len(keep))
	for i, p := range keep {
		ws[i] = hpcjob.WorkerOf(job, p)
	}
	cm := hpcjob.HostfileConfigMap(job, ws)
	c.binds.Add(1)
	go func() {
		defer c.binds.Done()
		if err := c.applyConfigMap(ctx, job, cm); err != nil {
			c.log.Warn("republishing the hostfile after an interrupted rescale failed", "job", job.Namespace+"/"+job.Name, "err", err)
		}
	}()
	zero := int64(0)
	c.deletePods(ctx, job, extra, &zero)
	msg := fmt.Sprintf("the placer restarted during a rescale; the job keeps its %d workers (%d new workers deleted, its hostfile published again)",
		len(keep), len(extra))
	st.LastRescaleTime = &metav1.Time{Time: now}
	setCondition(st, ConditionRescaling, metav1.ConditionFalse, ReasonRescaleInterrupted, msg)
	c.writeStatus(ctx, u, st)
	c.event(u, true, ReasonRescaleInterrupted, "%s", msg)
	return true
}

func (c *Controller) markDirty(key string) {
	c.mu.Lock()
	c.dirtyJobs[key] = true
	c.mu.Unlock()
}
