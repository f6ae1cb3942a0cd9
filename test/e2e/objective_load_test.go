//go:build e2e

// A service held to a p99 target under a real load while an HPC job takes a pinned core (issue
// 20): cpuservice (the worker image) under bench/loadgen's open-loop schedule, its objective read
// from the service's own p99 gauge by the placer's loop. The HPC job's worker is pinned by the
// node agent, which takes its core out of the shared pool the service runs in; the service's p99
// goes over the target, the loop grows the pod in place until the target is met again, and when
// the load drops it shrinks the pod back. The run's time series (load, p99, CPUs granted,
// decisions) is written as JSON and PNG by bench/servicerun, as make bench-dc-objective's arms are.
package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/internal/loadgen"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

const (
	// underLoadTarget is the service's objective: p99 ≤ 30 ms.
	underLoadTarget = 30 * time.Millisecond
	// underLoadMinCPU is the service's least CPU per pod (millicores), where the loop takes it
	// before the load: 110 requests/s of underLoadWork use about 0.29 of a core, so the pod runs
	// near its quota and a CPU taken from its shared pool shows in its p99.
	underLoadMinCPU = 300
	// underLoadWork is cpuservice's -work: about 2.6 ms of one core per request on this machine.
	underLoadWork = 1000
	// underLoadPeak is the load until the target is restored after the pin: 110 requests/s (for
	// at most 90 s); underLoadLow is the load after it drops: 20 requests/s (for at most
	// 45 s, cut once the loop has shrunk the pod).
	underLoadPeak = "90s@110"
	underLoadLow  = "45s@20"
	// underLoadHPCAt is the earliest time, into the load, the HPC job comes; it comes once the
	// service has met its target for underLoadSteady at no more than half-way from its minimum to
	// its maximum (a pod grown for noise before the pin is shrunk back by the loop first).
	underLoadHPCAt = 10 * time.Second
	// underLoadSteady is how long the objective's Met condition must have been True before the
	// HPC job comes: the baseline the pin is measured against.
	underLoadSteady = 8 * time.Second
	// underLoadHold is how long the target must be met again, after the growth, before the load
	// drops.
	underLoadHold = 5 * time.Second
	// underLoadStabilization is the objective's scaleDownStabilizationSeconds: longer than
	// underLoadHold, so the violation before "met again" is still recalled when the load drops
	// and the loop shrinks only after the drop, at about this many seconds after the violation.
	underLoadStabilization = 15
	// cpuserviceP99 is cpuservice's gauge of the p99 over its last -window.
	cpuserviceP99 = "cpuservice_request_duration_p99_seconds"
)

// underLoadSeries is _output/e2e/TestServiceObjectiveUnderLoad/series.json.
type underLoadSeries struct {
	TargetP99Seconds float64       `json:"targetP99Seconds"`
	Trace            loadgen.Trace `json:"trace"`
	Work             int           `json:"cpuserviceWork"`
	PodCPUMin        string        `json:"podCPUMin"`
	PodCPUMax        string        `json:"podCPUMax"`
	HPCPinnedCPUs    string        `json:"hpcPinnedCPUs,omitempty"`
	// Phases holds, in seconds from the load's start, when the test saw each phase: steady,
	// hpcJobCreated, hpcPinned, violated, grown, metAgain (when Met turned True again),
	// loadDropped, shrunk. A phase not reached is absent.
	Phases map[string]float64 `json:"phases"`
	// Run is the load generator's and the sampler's series (bench/servicerun).
	Run *servicerun.Measured `json:"run"`
}

func TestServiceObjectiveUnderLoad(t *testing.T) {
	framework.Setup(t).RequireCPUManagerPolicy(t, "none") // the static policy makes resizes of Guaranteed pods infeasible
	c, _ := deployPlacer(t)                               // skips unless the node has an exclusive CPU free
	requireResizeSubresource(t, c)
	waitForObjectiveCRD(t, c)
	peak, err := loadgen.ParseTrace(underLoadPeak)
	if err != nil {
		t.Fatal(err)
	}
	low, err := loadgen.ParseTrace(underLoadLow)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	c.DumpOnFailure(t, ns)
	port := freeHostPort(t)

	// The service: one Guaranteed pod of cpuservice at the minimum, placed by the placer.
	ctr := framework.Container("web", framework.WorkerImage, "/usr/local/bin/cpuservice",
		fmt.Sprintf("-listen=:%d", port), fmt.Sprintf("-work=%d", underLoadWork), "-window=5s")
	createWebDeployment(t, c, ns, ctr, fmt.Sprintf("%dm", underLoadMinCPU), "/healthz", port)
	pod := waitForServicePod(t, c, ns)
	if pod.Status.ContainerStatuses[0].Resources == nil {
		t.Skipf("the kubelet of node %s reports no container resources: in-place pod resize (InPlacePodVerticalScaling) is off there", pod.Spec.NodeName)
	}
	createNeighbour(t, c, ns, pod.Spec.NodeName)
	maxCPU := serviceRoom(t, c, pod)
	series := &underLoadSeries{
		TargetP99Seconds: underLoadTarget.Seconds(), Work: underLoadWork,
		PodCPUMin: fmt.Sprintf("%dm", underLoadMinCPU), PodCPUMax: fmt.Sprintf("%dm", maxCPU), Phases: map[string]float64{},
	}
	createServiceObjective(t, c, &v1alpha1.ServiceObjective{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ServiceObjectiveKind},
		ObjectMeta: metav1.ObjectMeta{Name: "web-p99", Namespace: ns},
		Spec: v1alpha1.ServiceObjectiveSpec{
			TargetRef: v1alpha1.ObjectiveTargetRef{Kind: v1alpha1.TargetDeployment, Name: "web"},
			Metric: v1alpha1.ObjectiveMetric{
				Target: *resource.NewMilliQuantity(underLoadTarget.Milliseconds(), resource.DecimalSI), Direction: v1alpha1.AtMost,
				Source: v1alpha1.MetricSource{Pods: &v1alpha1.PodsMetricSource{Port: port, Metric: cpuserviceP99}},
			},
			PodBounds: v1alpha1.PodBounds{
				Min: v1alpha1.PodSize{CPU: *resource.NewMilliQuantity(underLoadMinCPU, resource.DecimalSI), Memory: resource.MustParse("64Mi"), IOBandwidth: resource.MustParse("1M")},
				Max: v1alpha1.PodSize{CPU: *resource.NewMilliQuantity(maxCPU, resource.DecimalSI), Memory: resource.MustParse("64Mi"), IOBandwidth: resource.MustParse("100M")},
			},
			Replicas:                      v1alpha1.ReplicaBounds{Min: 1, Max: 1}, // the pod holds a port of the host
			PeriodSeconds:                 1,
			ScaleDownStabilizationSeconds: underLoadStabilization,
		},
	})
	// The loop adopts the service at one core within the bounds and, without load (a p99 of 0),
	// shrinks it to its minimum.
	waitForSize(t, c, ns, fmt.Sprintf("the minimum, %dm, before the load", underLoadMinCPU), func(cpu int64) bool { return cpu == underLoadMinCPU })

	// The load, with a sample of the service every second.
	roots := map[string]string{}
	for _, n := range c.Nodes {
		roots[n.Name] = n.CgroupRoot
	}
	s := &servicerun.Sampler{
		Client: c.Client, Namespace: ns, Name: "web", Port: int(port), Path: "/work",
		Decided:    servicerun.ObjectiveDecided(c.Dynamic, ns, "web-p99"),
		CPUSeconds: servicerun.CgroupCPUSeconds(framework.CgroupRoot, roots),
	}
	if err := s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	run := startLoad(t, s, peak)
	defer run.finish(t, c, series)
	at := func(phase string) time.Time {
		now := time.Now()
		series.Phases[phase] = now.Sub(run.start).Seconds()
		t.Logf("%5.1f s: %s", series.Phases[phase], phase)
		return now
	}
	peakEnds := run.start.Add(peak.Duration())

	// 1. The service meets its target at the minimum under the load, steadily; then the HPC job
	//    comes and its worker is pinned to a core the service's pod no longer runs on.
	var atPin int64
	steadyMax := (underLoadMinCPU + maxCPU) / 2
	waitForObjective(t, c, ns, fmt.Sprintf("the target met for %s under the load, %s in at least, at %dm or less", underLoadSteady, underLoadHPCAt, steadyMax), 45*time.Second, func(st *v1alpha1.ServiceObjectiveStatus) error {
		if d := time.Since(run.start); d < underLoadHPCAt {
			return fmt.Errorf("%.1f s of load", d.Seconds())
		}
		if err := metSince(st, run.start, metav1.ConditionTrue); err != nil {
			return err
		}
		if since := meta.FindStatusCondition(st.Conditions, v1alpha1.ObjectiveMet).LastTransitionTime.Time; time.Since(since) < underLoadSteady {
			return fmt.Errorf("met since %s only", since.Format(time.TimeOnly))
		}
		if st.PodSize == nil {
			return fmt.Errorf("no size in the status")
		}
		if atPin = st.PodSize.CPU.MilliValue(); atPin > steadyMax {
			return fmt.Errorf("%dm per pod", atPin)
		}
		return nil
	})
	at("steady")
	job := testJob("hpc", 1)
	job.Spec.Profile = v1alpha1.ProfileCPU
	job.Spec.Worker.Spec.Containers[0].Command = []string{"/usr/local/bin/fgworker", "dgemm", "-np", "1", "-n", "256", "-duration", "10m", "-o", "log"}
	createJob(t, c, ns, job)
	at("hpcJobCreated")
	_, pin := waitPinned(t, c, ns, "hpc-worker-0", 1)
	series.HPCPinnedCPUs = pin.String()
	framework.Eventually(t, "the service's pod to leave the pinned CPU "+pin.String(), 10*time.Second, func(context.Context) error {
		cpus, _, dir, err := cpusetOf(pod, "web")
		if err != nil {
			return err
		}
		if cpus.Intersection(pin).Size() > 0 {
			return fmt.Errorf("%s carries %s", dir, cpus)
		}
		return nil
	})
	pinned := at("hpcPinned")

	// 2. The service's p99 goes over the target; the loop grows the pod in place (the kubelet's
	//    report and the container's CFS quota follow) until the target is met again, under the
	//    same load.
	waitForObjective(t, c, ns, "a violation after the pin", time.Until(peakEnds)/2, func(st *v1alpha1.ServiceObjectiveStatus) error {
		return metSince(st, pinned, metav1.ConditionFalse)
	})
	at("violated")
	grown := waitForSize(t, c, ns, fmt.Sprintf("a growth in place from %dm", atPin), func(cpu int64) bool { return cpu > atPin })
	grew := at("grown")
	var atDrop int64
	var metAgain time.Time
	waitForObjective(t, c, ns, fmt.Sprintf("the target met again for %s", underLoadHold), time.Until(peakEnds), func(st *v1alpha1.ServiceObjectiveStatus) error {
		if err := metSince(st, grew, metav1.ConditionTrue); err != nil {
			return err
		}
		since := meta.FindStatusCondition(st.Conditions, v1alpha1.ObjectiveMet).LastTransitionTime.Time
		if time.Since(since) < underLoadHold {
			return fmt.Errorf("met again since %s only", since.Format(time.TimeOnly))
		}
		if st.PodSize == nil {
			return fmt.Errorf("no size in the status")
		}
		metAgain, atDrop = since, st.PodSize.CPU.MilliValue()
		return nil
	})
	series.Phases["metAgain"] = metAgain.Sub(run.start).Seconds()

	// 3. The load drops; the loop shrinks the pod once the violation is no longer recalled, and
	//    not before the drop.
	if atDrop <= atPin {
		t.Fatalf("the loop had shrunk the pod back to %dm (%dm at the pin) before the load dropped", atDrop, atPin)
	}
	run.drop(t, low)
	at("loadDropped")
	waitForObjective(t, c, ns, fmt.Sprintf("a shrink from %dm after the load dropped", atDrop), low.Duration()-5*time.Second, func(st *v1alpha1.ServiceObjectiveStatus) error {
		if st.PodSize == nil {
			return fmt.Errorf("no size in the status")
		}
		if cpu := st.PodSize.CPU.MilliValue(); cpu >= atDrop {
			return fmt.Errorf("%dm per pod (%dm at the drop)", cpu, atDrop)
		}
		return nil
	})
	shrunk := waitForSize(t, c, ns, fmt.Sprintf("the shrink from %dm applied", atDrop), func(cpu int64) bool { return cpu < atDrop })
	at("shrunk")
	t.Logf("CPU per pod: %dm → HPC job pins CPU %s → %dm (grown) → %dm at the drop → %dm (shrunk)", atPin, pin, grown, atDrop, shrunk)
	time.Sleep(3 * time.Second) // the sampler's view of the shrunk pod

	// 4. The load generator's view: the series shows the pin's violation, the grant rising and
	//    falling, and the target met before the pin and between "met again" and the drop.
	m := run.finish(t, c, series)
	if m == nil {
		t.FailNow()
	}
	checkUnderLoadSeries(t, m, series.Phases, atPin)
}

// createNeighbour starts pod batch on node: a Burstable tenant of the shared pool (200m requested,
// no CPU limit) that streams over memory on one thread for as long as it runs — fgworker's noisy
// neighbour. Beside it on two CPUs the service finds one CPU free; once an HPC worker is pinned to
// one of them, the two share what is left, and their CPU weights (their requests) decide.
func createNeighbour(t *testing.T, c *framework.Cluster, ns, node string) {
	t.Helper()
	ctr := framework.Container("noise", framework.WorkerImage, "/usr/local/bin/fgworker", "noise", "-threads", "1", "-mem-mib", "32")
	ctr.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	pod := framework.Pod("batch", ctr)
	pod.Spec.NodeName = node
	c.CreatePod(t, ns, pod)
	c.WaitForPod(t, ns, "batch", "running", framework.PodStartTimeout, framework.Running)
}

// waitForObjectiveCRD waits until the API server serves ServiceObjectives.
func waitForObjectiveCRD(t *testing.T, c *framework.Cluster) {
	t.Helper()
	framework.Eventually(t, "the ServiceObjective CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(v1alpha1.ServiceObjectiveGroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
}

// serviceRoom is the most CPU (millicores, a multiple of 50) the service's pod can be given
// beside a 1-CPU HPC worker: the node's allocatable CPU less what its other pods request. It
// skips when that leaves no room to grow from the minimum.
func serviceRoom(t *testing.T, c *framework.Cluster, service *corev1.Pod) int64 {
	t.Helper()
	ctx := context.Background()
	node, err := c.Client.CoreV1().Nodes().Get(ctx, service.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		t.Fatal(err)
	}
	room := node.Status.Allocatable.Cpu().MilliValue() - 1000
	for _, p := range pods.Items {
		if p.UID == service.UID || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			room -= ctr.Resources.Requests.Cpu().MilliValue()
		}
	}
	room -= room % 50
	if room < 2*underLoadMinCPU {
		t.Skipf("node %s leaves the service %dm beside a 1-CPU HPC worker; the test grows it from %dm and needs %dm", node.Name, room, underLoadMinCPU, 2*underLoadMinCPU)
	}
	return room
}

// waitForObjective waits until ok accepts objective web-p99's status.
func waitForObjective(t *testing.T, c *framework.Cluster, ns, what string, timeout time.Duration, ok func(*v1alpha1.ServiceObjectiveStatus) error) {
	t.Helper()
	framework.Eventually(t, "objective web-p99: "+what, timeout, func(ctx context.Context) error {
		obj, err := servicerun.Objective(ctx, c.Dynamic, ns, "web-p99")
		if err != nil {
			return err
		}
		if err := ok(&obj.Status); err != nil {
			return fmt.Errorf("%w (smoothed %v, size %+v, decision %s: %s)", err, obj.Status.Smoothed, obj.Status.PodSize, obj.Status.LastDecision, obj.Status.LastDecisionReason)
		}
		return nil
	})
}

// metSince checks that the status's condition Met is want (True: met, False: violated) for a
// measurement taken since since (to the second: status times are written in whole seconds).
func metSince(st *v1alpha1.ServiceObjectiveStatus, since time.Time, want metav1.ConditionStatus) error {
	met := meta.FindStatusCondition(st.Conditions, v1alpha1.ObjectiveMet)
	switch {
	case st.LastMeasurementTime == nil || st.LastMeasurementTime.Time.Before(since.Truncate(time.Second)):
		return fmt.Errorf("no measurement since %s", since.Format(time.TimeOnly))
	case met == nil:
		return fmt.Errorf("no condition %s", v1alpha1.ObjectiveMet)
	case met.Status != want:
		return fmt.Errorf("%s=%s: %s", v1alpha1.ObjectiveMet, met.Status, met.Message)
	}
	return nil
}

// underLoad is the load running on the service while the test watches the objective: a first
// run of loadgen until the load drops, then a second, joined into one report; the sampler runs
// throughout.
type underLoad struct {
	start       time.Time
	s           *servicerun.Sampler
	stopSampler context.CancelFunc
	sampled     chan error
	// cancel and done are the running part's; first is the report of the part before the drop.
	cancel context.CancelFunc
	done   chan loadResult
	first  *loadgen.Report
	once   sync.Once
	m      *servicerun.Measured
}

type loadResult struct {
	rep *loadgen.Report
	err error
}

// startLoad starts the sampler and the load generator on trace.
func startLoad(t *testing.T, s *servicerun.Sampler, trace loadgen.Trace) *underLoad {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	u := &underLoad{start: time.Now(), s: s, stopSampler: stop, sampled: make(chan error, 1)}
	go func() { u.sampled <- s.Loop(ctx) }()
	u.run(trace)
	return u
}

// run starts loadgen on trace. Its requests run to their answer (10 s at most) when the run is
// cut short, so that cutting it counts no request as failed.
func (u *underLoad) run(trace loadgen.Trace) {
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel, u.done = cancel, make(chan loadResult, 1)
	opts := loadgen.DefaultOptions(trace)
	opts.Timeout, opts.Record = 10*time.Second, true
	do := u.s.Doer(loadgen.NewHTTPClient(opts.MaxInFlight))
	go func() {
		rep, err := loadgen.Run(ctx, opts, func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Timeout)
			defer cancel()
			return do(rctx)
		})
		u.done <- loadResult{rep, err}
	}()
}

// drop ends the running part and starts trace.
func (u *underLoad) drop(t *testing.T, trace loadgen.Trace) {
	t.Helper()
	u.cancel()
	r := <-u.done
	if r.err != nil {
		t.Fatalf("the load before the drop: %v", r.err)
	}
	u.first = r.rep
	u.run(trace)
}

// finish ends the load and the sampler (once), measures the run and writes its series under
// _output/e2e/<test>/ as series.json and series.png, also when the test has failed. It returns nil
// when the run could not be measured (the test failed then).
func (u *underLoad) finish(t *testing.T, c *framework.Cluster, series *underLoadSeries) *servicerun.Measured {
	t.Helper()
	u.once.Do(func() {
		u.cancel()
		r := <-u.done
		u.stopSampler()
		if err := <-u.sampled; r.err == nil {
			r.err = err
		}
		if r.err == nil && u.first != nil {
			r.rep, r.err = loadgen.Join(u.first, r.rep)
		}
		if r.err != nil {
			t.Errorf("the load: %v", r.err)
			return
		}
		if err := u.s.Sample(context.Background()); err != nil {
			t.Errorf("the last sample: %v", err)
		}
		// A load cut short leaves the trace's later seconds without requests.
		n := len(r.rep.Seconds)
		for n > 0 && r.rep.Seconds[n-1].Offered == 0 {
			n--
		}
		r.rep.Seconds = r.rep.Seconds[:n]
		u.m = servicerun.Measure(r.rep, u.s.Points(r.rep.Start), underLoadTarget.Seconds())
		series.Trace, series.Run = r.rep.Trace, u.m
		dir := c.RepoPath(filepath.Join("_output", "e2e", t.Name()))
		if err := servicerun.Save(dir, "series", series, func(w io.Writer) error {
			return u.m.PNG(w, "web-p99", underLoadTarget.Seconds())
		}); err != nil {
			t.Errorf("write the series: %v", err)
			return
		}
		t.Logf("series in %s: series.json, series.png — %d s of load, %d requests, %d errors, p99 %.1f ms, %d s over the target (loadgen), %.1f CPU-seconds, %d resizes",
			dir, len(u.m.Load), u.m.Requests, u.m.Errors, u.m.P99Seconds*1e3, u.m.ViolationSeconds, u.m.CPUSeconds, u.m.Resizes)
	})
	return u.m
}

// checkUnderLoadSeries checks the phases in the run's series: the load generator saw the target met
// in most of the seconds before the HPC job in which the loop saw it met, violated after the pin,
// and met in most seconds between the loop's "met again" and the drop; the CPUs granted rose above
// atPin (millicores) after the pin and fell after the drop.
func checkUnderLoadSeries(t *testing.T, m *servicerun.Measured, phases map[string]float64, atPin int64) {
	t.Helper()
	target := underLoadTarget.Seconds()
	violated, met, between, baseline, steady := 0, 0, 0, 0, 0
	for _, s := range m.Load {
		x := float64(s.Second)
		if x >= phases["steady"]-underLoadSteady.Seconds() && x+1 <= phases["steady"] {
			baseline++
			if s.P99Seconds <= target && s.Errors == 0 {
				steady++
			}
		}
		if x >= phases["hpcPinned"] && x < phases["loadDropped"] && (s.P99Seconds > target || s.Errors > 0) {
			violated++
		}
		if x >= phases["metAgain"] && x+1 <= phases["loadDropped"] {
			between++
			if s.P99Seconds <= target && s.Errors == 0 {
				met++
			}
		}
	}
	if 2*steady < baseline {
		t.Errorf("the load generator saw the target met in %d of the %d seconds before the HPC job in which the loop saw it met, want most", steady, baseline)
	}
	if violated == 0 {
		t.Errorf("the load generator saw no second over %s between the pin (%.0f s) and the drop (%.0f s)", underLoadTarget, phases["hpcPinned"], phases["loadDropped"])
	}
	if between > 0 && 2*met < between {
		t.Errorf("the load generator saw the target met in %d of the %d seconds between the loop's 'met again' and the drop, want most", met, between)
	}
	// The CPUs granted at their peak before the drop, and at their least after it (the loop may
	// grow the pod again after a shrink that went too far: a probe, docs/objectives.md).
	peak, after := 0.0, math.Inf(1)
	for _, p := range m.Size {
		switch {
		case p.T >= phases["hpcPinned"] && p.T < phases["loadDropped"]:
			peak = max(peak, p.Granted)
		case p.T >= phases["loadDropped"]:
			after = min(after, p.Granted)
		}
	}
	if pinCPU := float64(atPin) / 1000; peak <= pinCPU || after >= peak {
		t.Errorf("CPUs granted: %.2f at most between the pin and the drop, %.2f at least after the drop; want above %.2f, then less", peak, after, pinCPU)
	}
	if len(m.Decisions) < 2 {
		t.Errorf("%d changes of size in the series, want a growth and a shrink", len(m.Decisions))
	}
	t.Logf("load generator: met in %d of %d seconds before the HPC job; %d seconds over the target between pin and drop; met in %d of %d seconds between 'met again' and the drop", steady, baseline, violated, met, between)
}
