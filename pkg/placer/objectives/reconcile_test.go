package objectives

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

var objLabels = map[string]string{"namespace": ns, "objective": "web-p99"}

func withKind(kind string) map[string]string {
	return map[string]string{"namespace": ns, "objective": "web-p99", "kind": kind}
}

// checkResources fails unless pod's container has cpu and memory as both request and limit.
func checkResources(t *testing.T, p *corev1.Pod, cpu, memory string) {
	t.Helper()
	r := p.Spec.Containers[0].Resources
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		if l.Cpu().Cmp(resource.MustParse(cpu)) != 0 || l.Memory().Cmp(resource.MustParse(memory)) != 0 {
			t.Errorf("pod %s has requests %v, limits %v; want %s CPU and %s memory as both", p.Name, r.Requests, r.Limits, cpu, memory)
			return
		}
	}
}

func checkCondition(t *testing.T, st *v1alpha1.ServiceObjectiveStatus, typ string, status metav1.ConditionStatus, reason, inMessage string) {
	t.Helper()
	s, r, m := condition(st, typ)
	if s != status || r != reason || !strings.Contains(m, inMessage) {
		t.Errorf("condition %s is %s/%s %q; want %s/%s containing %q", typ, s, r, m, status, reason, inMessage)
	}
}

func checkSize(t *testing.T, st *v1alpha1.ServiceObjectiveStatus, replicas int32, cpu, memory, io string) {
	t.Helper()
	ps := st.PodSize
	if ps == nil || st.Replicas != replicas || ps.CPU.Cmp(resource.MustParse(cpu)) != 0 || ps.Memory.Cmp(resource.MustParse(memory)) != 0 ||
		ps.IOBandwidth.Cmp(resource.MustParse(io)) != 0 {
		t.Errorf("status size %d × %+v; want %d × (%s CPU, %s, %s I/O)", st.Replicas, ps, replicas, cpu, memory, io)
	}
}

// A violated objective grows the pods in place by the shortfall, through their resize
// subresource, and reports it: status, Resized event, metrics. Within the margin it then holds.
func TestViolationGrowsPodsInPlace(t *testing.T) {
	g := newGaugeServer(t, 0.040)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "1", "1Gi"))
	h.createObjective(objectiveSpec(port), nil)

	h.period()
	if got := h.resizes(); !slices.Equal(got, []string{"web-a"}) {
		t.Errorf("resized %v, want [web-a]", got)
	}
	checkResources(t, h.pod("web-a"), "2", "2Gi")
	st := h.status()
	// No history: the thesis's starting size (1 core, 1Gi, 10M) × the pressure 0.040/0.020.
	checkSize(t, st, 1, "2", "2Gi", "20M")
	if st.LastDecision != "Grow" || st.LastDecisionReason != "Violated" || st.ObservedGeneration != 1 || st.LastResizeTime == nil {
		t.Errorf("decision %s/%s, generation %d, resized at %v", st.LastDecision, st.LastDecisionReason, st.ObservedGeneration, st.LastResizeTime)
	}
	if st.LastMeasurement.String() != "40m" || st.Smoothed.String() != "40m" {
		t.Errorf("measurement %v, smoothed %v; want 40m", st.LastMeasurement, st.Smoothed)
	}
	if h := st.History; h == nil || len(h.Samples) != 0 || h.NeededCPU.String() != "2" {
		t.Errorf("history %+v; want no samples since the resize and 2 CPUs needed", h)
	}
	checkCondition(t, st, v1alpha1.ObjectiveValid, metav1.ConditionTrue, "Valid", "")
	checkCondition(t, st, v1alpha1.ObjectiveMeasured, metav1.ConditionTrue, ReasonMeasured, "web_p99_seconds 0.04 from 1 of 1 Ready pods")
	checkCondition(t, st, v1alpha1.ObjectiveMet, metav1.ConditionFalse, ReasonTargetViolated, "decision Grow (Violated)")
	checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, ReasonResizeInProgress, "pod web-a is being resized to 2 CPU and 2Gi memory")
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "Normal Resized resized pod web-a in place to 2 CPU and 2Gi memory (from 1 and 1Gi) for objective shop/web-p99") {
		t.Errorf("events %q", ev)
	}
	for name, want := range map[string]float64{
		"finegrain_objective_violation_seconds_total": 10, "finegrain_objective_measured_value": 0.04,
		"finegrain_objective_smoothed_value": 0.04, "finegrain_objective_target_value": 0.02,
		"finegrain_objective_pod_cpu_cores": 2, "finegrain_objective_replicas": 1,
	} {
		if got := h.metric(name, objLabels); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := h.metric("finegrain_objective_resizes_total", withKind("pod")); got != 1 {
		t.Errorf("pod resizes %v, want 1", got)
	}

	// The kubelet applied it; the metric is now within the margin (0.018 of 0.020): hold.
	p := h.pod("web-a")
	p.Status.ContainerStatuses[0].Resources = p.Spec.Containers[0].Resources.DeepCopy()
	if _, err := h.kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.set(0.018)
	h.period()
	st = h.status()
	if got := h.resizes(); len(got) != 0 || st.LastDecision != "Hold" || st.LastDecisionReason != "WithinMargin" {
		t.Errorf("resized %v, decision %s/%s; want no resize, Hold/WithinMargin", got, st.LastDecision, st.LastDecisionReason)
	}
	checkCondition(t, st, v1alpha1.ObjectiveMet, metav1.ConditionTrue, ReasonTargetMet, "")
	checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionTrue, ReasonApplied, "")
	if got := h.metric("finegrain_objective_violation_seconds_total", objLabels); got != 10 {
		t.Errorf("violation seconds %v after a good period, want still 10", got)
	}
}

// A pod whose node cannot take the grown size (the kubelet's PodResizePending, Infeasible) keeps
// what it runs with, and the service grows by replicas through the scale subresource instead.
func TestInfeasibleResizeGrowsReplicas(t *testing.T) {
	g := newGaugeServer(t, 0.040)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	p := pod("web-a", ip, "4", "4Gi")
	two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: two, Limits: two}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible,
		Message: "Node didn't have enough capacity: cpu, requested: 4000, capacity: 2000",
	})
	h := newHarness(t, DefaultOptions(), d, rs, p)
	h.createObjective(objectiveSpec(port), &v1alpha1.ServiceObjectiveStatus{
		Replicas: 1,
		PodSize:  &v1alpha1.PodSize{CPU: resource.MustParse("4"), Memory: resource.MustParse("4Gi"), IOBandwidth: resource.MustParse("40M")},
	})

	h.period()
	st := h.status()
	// The pods run 2 CPUs; 2 × 2 = 4 CPUs of capacity → 2 replicas of the pod as it runs.
	checkSize(t, st, 2, "2", "2Gi", "40M")
	if h.replicas() != 2 {
		t.Errorf("Deployment scaled to %d, want 2", h.replicas())
	}
	// The pending resize is taken back to the CPU it runs with; its memory limit may not be
	// lowered in place.
	checkResources(t, h.pod("web-a"), "2", "4Gi")
	checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, ReasonResizeInfeasible, "Node didn't have enough capacity")
	ev := strings.Join(h.events(), "\n")
	if !strings.Contains(ev, "Normal Scaled scaled Deployment web from 1 to 2 replicas for objective shop/web-p99") {
		t.Errorf("events %q lack the scale", ev)
	}
	if got := h.metric("finegrain_objective_resizes_total", withKind("replicas")); got != 1 {
		t.Errorf("replica resizes %v, want 1", got)
	}
}

// At every maximum a violation holds: no resize, no scale.
func TestAtMaximumHolds(t *testing.T) {
	g := newGaugeServer(t, 0.100)
	ip, port := g.hostPort(t)
	d, rs := deployment(4)
	pods := []*corev1.Pod{}
	for i := range 4 {
		pods = append(pods, pod(fmt.Sprintf("web-%d", i), ip, "4", "4Gi"))
	}
	h := newHarness(t, DefaultOptions(), d, rs, pods[0], pods[1], pods[2], pods[3])
	h.createObjective(objectiveSpec(port), &v1alpha1.ServiceObjectiveStatus{
		Replicas: 4,
		PodSize:  &v1alpha1.PodSize{CPU: resource.MustParse("4"), Memory: resource.MustParse("4Gi"), IOBandwidth: resource.MustParse("100M")},
	})
	h.period()
	st := h.status()
	if st.LastDecision != "Hold" || st.LastDecisionReason != "AtMaximum" || len(h.resizes()) != 0 || h.replicas() != 4 {
		t.Errorf("decision %s/%s, resized %v, replicas %d; want Hold/AtMaximum and nothing changed", st.LastDecision, st.LastDecisionReason, h.resizes(), h.replicas())
	}
	checkSize(t, st, 4, "4", "4Gi", "100M")
	checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionTrue, ReasonApplied, "")
	if got := h.metric("finegrain_objective_violation_seconds_total", objLabels); got != 10 {
		t.Errorf("violation seconds %v, want 10", got)
	}
}

// The law's history lives in the status: a placer restarted between periods (a new controller
// each period) still shrinks an over-performing service after a whole window, and no earlier.
func TestRestartKeepsHistory(t *testing.T) {
	g := newGaugeServer(t, 0.005)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "2", "2Gi"))
	h.createObjective(objectiveSpec(port), &v1alpha1.ServiceObjectiveStatus{
		Replicas: 1,
		PodSize:  &v1alpha1.PodSize{CPU: resource.MustParse("2"), Memory: resource.MustParse("2Gi"), IOBandwidth: resource.MustParse("20M")},
	})
	for i := 1; i <= 2; i++ {
		h.period()
		st := h.status()
		if st.LastDecisionReason != "Settling" || st.History == nil || len(st.History.Samples) != i || len(h.resizes()) != 0 {
			t.Fatalf("period %d: decision %s/%s, history %+v, resized %v; want Settling with %d samples kept", i, st.LastDecision, st.LastDecisionReason, st.History, h.resizes(), i)
		}
		h.restart()
	}
	h.period()
	st := h.status()
	// 0.005 of 0.020 beats the target by 75%: the capacity halves (at most), 2 → 1 CPU.
	if st.LastDecision != "Shrink" || st.LastDecisionReason != "OverPerforming" {
		t.Errorf("third period: %s/%s, want Shrink/OverPerforming", st.LastDecision, st.LastDecisionReason)
	}
	checkSize(t, st, 1, "1", "1Gi", "10M")
	// The memory limit stays: without resizePolicy RestartContainer the API refuses to lower it.
	checkResources(t, h.pod("web-a"), "1", "2Gi")
}

// The objective's query API is fetched only when the placer's --objective-query-urls allows it.
func TestQuerySourceMustBeAllowed(t *testing.T) {
	var hits atomic.Int64
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.04"]}]}}`)
	}))
	defer prom.Close()
	spec := objectiveSpec(8080)
	spec["metric"].(map[string]any)["source"] = map[string]any{"query": map[string]any{
		"url": prom.URL + "/prom", "query": `histogram_quantile(0.99, sum by (le) (rate(web_seconds_bucket[1m])))`,
	}}
	d, rs := deployment(1)
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", "10.0.0.7", "1", "1Gi"))
	h.createObjective(spec, nil)
	h.period()
	st := h.status()
	checkCondition(t, st, v1alpha1.ObjectiveValid, metav1.ConditionFalse, ReasonSourceNotAllowed, "--objective-query-urls does not list it")
	if hits.Load() != 0 || len(h.resizes()) != 0 || st.PodSize != nil || st.LastDecision != "" {
		t.Errorf("a refused source: %d requests, resized %v, status %+v; want nothing done", hits.Load(), h.resizes(), st)
	}

	allowed := DefaultOptions()
	allowed.AllowedQueryURLs = []string{prom.URL + "/prom/"}
	h = newHarness(t, allowed, d, rs, pod("web-a", "10.0.0.7", "1", "1Gi"))
	h.createObjective(spec, nil)
	h.period()
	st = h.status()
	checkCondition(t, st, v1alpha1.ObjectiveValid, metav1.ConditionTrue, "Valid", "")
	checkCondition(t, st, v1alpha1.ObjectiveMeasured, metav1.ConditionTrue, ReasonMeasured, "query 0.04 from "+prom.URL+"/prom")
	if hits.Load() != 1 || st.LastDecision != "Grow" {
		t.Errorf("an allowed source: %d requests, decision %s; want 1 and Grow", hits.Load(), st.LastDecision)
	}
}

func TestQueryAllowed(t *testing.T) {
	c := &Controller{}
	var err error
	if c.allowed, err = parseAllowed([]string{"http://prometheus.monitoring:9090", "https://thanos.example/api/"}); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]bool{
		"http://prometheus.monitoring:9090":                 true,
		"http://prometheus.monitoring:9090/":                true,
		"http://PROMETHEUS.monitoring:9090/sub":             true,
		"https://thanos.example/api":                        true,
		"https://thanos.example/api/tenant-a":               true,
		"https://thanos.example/apiary":                     false,
		"https://thanos.example/api/../admin":               false,
		"https://thanos.example":                            false,
		"http://thanos.example/api":                         false,
		"http://prometheus.monitoring:9091":                 false,
		"http://prometheus.monitoring":                      false,
		"http://prometheus.monitoring:9090@169.254.169.254": false,
		"http://169.254.169.254/latest/meta-data":           false,
		"http://prometheus.monitoring:9090/?x=1":            false,
	} {
		if got := c.queryAllowed(raw); got != want {
			t.Errorf("queryAllowed(%s) = %v, want %v", raw, got, want)
		}
	}
	for _, bad := range []string{"prometheus:9090", "ftp://x", "http://u:p@x", "http://x/?q", "http://x/a/../b", ""} {
		if err := CheckAllowedQueryURL(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("CheckAllowedQueryURL(%q) = %v, want an error naming it", bad, err)
		}
	}
	if _, err := New(nil, nil, nil, nil, nil, Options{AllowedQueryURLs: []string{"x"}}); err == nil {
		t.Error("New took a bad allowed query URL")
	}
}

// An invalid objective gets Valid=False/InvalidSpec and its target is left alone.
func TestInvalidObjectiveIsLeftAlone(t *testing.T) {
	g := newGaugeServer(t, 0.040)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "1", "1Gi"))
	spec := objectiveSpec(port)
	spec["replicas"] = map[string]any{"min": int64(3), "max": int64(2)}
	h.createObjective(spec, nil)
	h.period()
	st := h.status()
	checkCondition(t, st, v1alpha1.ObjectiveValid, metav1.ConditionFalse, ReasonInvalidSpec, "spec.replicas.max")
	if g.hits.Load() != 0 || len(h.kube.Actions()) != 0 || st.PodSize != nil {
		t.Errorf("an invalid objective: %d scrapes, API actions %v, size %+v; want none", g.hits.Load(), h.kube.Actions(), st.PodSize)
	}
}

// Pods that are not Guaranteed cannot be resized without changing their QoS class: the loop
// leaves them, says why, and grows by replicas.
func TestNotGuaranteedPodsGrowByReplicas(t *testing.T) {
	g := newGaugeServer(t, 0.040)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	p := pod("web-a", ip, "1", "1Gi")
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	p.Status.QOSClass = corev1.PodQOSBurstable
	h := newHarness(t, DefaultOptions(), d, rs, p)
	h.createObjective(objectiveSpec(port), nil)
	h.period()
	st := h.status()
	if len(h.resizes()) != 0 || h.replicas() != 2 {
		t.Errorf("resized %v, replicas %d; want no resize and 2 replicas", h.resizes(), h.replicas())
	}
	checkSize(t, st, 2, "1", "1Gi", "10M")
	checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, ReasonPodsNotGuaranteed, "pod web-a is Burstable")
}

// Pods that match the selector but that the Deployment does not control are neither measured
// nor resized.
func TestForeignPodsAreIgnored(t *testing.T) {
	g := newGaugeServer(t, 0.040)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	foreign := pod("impostor", ip, "1", "1Gi")
	foreign.OwnerReferences = nil
	other := pod("other-rs", ip, "1", "1Gi")
	other.OwnerReferences[0].UID = "uid-someone-else"
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "1", "1Gi"), foreign, other)
	h.createObjective(objectiveSpec(port), nil)
	h.period()
	if got := h.resizes(); !slices.Equal(got, []string{"web-a"}) {
		t.Errorf("resized %v, want only web-a", got)
	}
	if g.hits.Load() != 1 {
		t.Errorf("%d scrapes, want 1 (web-a)", g.hits.Load())
	}
}

// A missing target is reported, and a metric that cannot be read holds the size.
func TestMissingTargetAndUnreadableMetric(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	h.createObjective(objectiveSpec(1), nil)
	h.period()
	checkCondition(t, h.status(), v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, ReasonTargetNotFound, "read Deployment shop/web")

	g := newGaugeServer(t, 0.040)
	ip, _ := g.hostPort(t)
	d, rs := deployment(1)
	h = newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "1", "1Gi"))
	spec := objectiveSpec(1) // nothing listens on port 1
	h.createObjective(spec, nil)
	h.period()
	st := h.status()
	checkCondition(t, st, v1alpha1.ObjectiveMeasured, metav1.ConditionFalse, ReasonMeasurementFailed, "no pod answered")
	checkCondition(t, st, v1alpha1.ObjectiveMet, metav1.ConditionUnknown, "NoMeasurement", "")
	if st.LastDecision != "Hold" || len(h.resizes()) != 0 {
		t.Errorf("decision %s, resized %v; want Hold and nothing resized", st.LastDecision, h.resizes())
	}
}

func TestWantedKeepsMemoryLimitsTheAPIWillNotLower(t *testing.T) {
	p := pod("web-a", "10.0.0.7", "2", "2Gi")
	size := sizeOf(&v1alpha1.ServiceObjectiveStatus{Replicas: 1, PodSize: &v1alpha1.PodSize{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}})
	if cpu, mem := wanted(p, size); cpu.String() != "1" || mem.String() != "2Gi" {
		t.Errorf("default resize policy: %s, %s; want 1 CPU and the 2Gi limit kept", cpu.String(), mem.String())
	}
	p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	if _, mem := wanted(p, size); mem.String() != "1Gi" {
		t.Errorf("RestartContainer for memory: %s, want 1Gi", mem.String())
	}
}

func TestForgetDropsSeries(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	h.c.metrics.ViolationSeconds.WithLabelValues(ns, "web-p99").Add(3)
	h.c.metrics.Resizes.WithLabelValues(ns, "web-p99", "pod").Inc()
	h.c.metrics.Target.WithLabelValues(ns, "other").Set(1)
	h.c.metrics.forget(ns + "/web-p99")
	if h.metric("finegrain_objective_violation_seconds_total", objLabels) != -1 || h.metric("finegrain_objective_resizes_total", withKind("pod")) != -1 {
		t.Error("series of a deleted objective kept")
	}
	if h.metric("finegrain_objective_target_value", map[string]string{"objective": "other"}) != 1 {
		t.Error("another objective's series dropped")
	}
}

// Run measures each objective every periodSeconds through its informer, and forgets a deleted
// objective's series.
func TestRunEveryPeriod(t *testing.T) {
	h, g, port := onePodHarness(t, 0.018)
	spec := objectiveSpec(port)
	spec["periodSeconds"] = int64(1)
	h.createObjective(spec, nil)
	defer h.run()()
	waitFor(t, "two periods of samples in the status", func() bool {
		st := h.status()
		return st.History != nil && len(st.History.Samples) >= 2
	})
	if !h.c.HasSynced() || g.hits.Load() < 2 {
		t.Errorf("synced %v, %d scrapes", h.c.HasSynced(), g.hits.Load())
	}
	if err := h.dyn.Resource(objectiveGVR).Namespace(ns).Delete(t.Context(), "web-p99", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted objective's series to go", func() bool {
		return h.metric("finegrain_objective_target_value", objLabels) == -1
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without the ServiceObjective API the loop waits for it, and the placer stays ready.
func TestRunWaitsForTheAPI(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	h.kube.Resources = nil
	h.restart()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if !h.c.HasSynced() {
		t.Error("not ready while the API is not served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after its context ended, want nil", err)
	}
}

// An objective deleted during its period has no status to write, and that is no error.
func TestStatusOfADeletedObjective(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	h.createObjective(objectiveSpec(1), nil)
	u, err := h.dyn.Resource(objectiveGVR).Namespace(ns).Get(t.Context(), "web-p99", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.dyn.Resource(objectiveGVR).Namespace(ns).Delete(t.Context(), "web-p99", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.writeStatus(t.Context(), u, &v1alpha1.ServiceObjectiveStatus{ObservedGeneration: 1}); err != nil {
		t.Errorf("writeStatus of a deleted objective = %v, want nil", err)
	}
}

// Without in-place resize — the API server does not serve pods/resize, or the pod's kubelet does
// not resize (it reports no container resources) — the service grows by replicas and no pod is
// patched.
func TestWithoutInPlaceResizeGrowByReplicas(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		setup         func(h *harness, p *corev1.Pod)
	}{
		{"API", "the API server does not serve pods/resize", func(h *harness, _ *corev1.Pod) {
			h.kube.Resources = h.kube.Resources[:1]
		}},
		{"kubelet", "the kubelet of node n1 reports no resources of pod web-a's containers", func(_ *harness, p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources = nil
			p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGaugeServer(t, 0.040)
			ip, port := g.hostPort(t)
			d, rs := deployment(1)
			p := pod("web-a", ip, "1", "1Gi")
			h := newHarness(t, DefaultOptions())
			tc.setup(h, p)
			for _, o := range []runtime.Object{d, rs, p} {
				if err := h.kube.Tracker().Add(o); err != nil {
					t.Fatal(err)
				}
			}
			h.restart()
			h.createObjective(objectiveSpec(port), nil)
			h.period()
			st := h.status()
			if len(h.resizes()) != 0 || h.replicas() != 2 {
				t.Errorf("resized %v, replicas %d; want no resize and 2 replicas", h.resizes(), h.replicas())
			}
			checkSize(t, st, 2, "1", "1Gi", "10M")
			checkCondition(t, st, v1alpha1.ObjectiveSizeApplied, metav1.ConditionFalse, ReasonResizeUnavailable, tc.message)
		})
	}
}

// stallingServer is a pod's metric endpoint too loaded to answer: it holds every request until
// the client gives up or the test ends, on addr ("127.0.0.1:0" for any port).
func stallingServer(t *testing.T, addr string) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

// A service whose pods do not answer their metric endpoint within the scrape timeout is too
// loaded to measure: for a latency (AtMost, the worst pod counts) one such pod is a violation
// and the service grows by the most a period allows; for a throughput (AtLeast, the sum) only
// when no pod answers, otherwise the pods that answered are summed.
func TestUnresponsivePodsGrow(t *testing.T) {
	slow := stallingServer(t, "127.0.0.1:0")
	_, portS, _ := net.SplitHostPort(slow.Listener.Addr().String())
	port, _ := strconv.Atoi(portS)
	// A second pod at another loopback address, same port, that answers 0.010.
	fast := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE web_p99_seconds gauge\nweb_p99_seconds 0.010\n")
	}))
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", portS))
	if err != nil {
		t.Skipf("a second loopback address for the answering pod: %v", err)
	}
	fast.Listener.Close()
	fast.Listener = l
	fast.Start()
	t.Cleanup(fast.Close)

	for _, dir := range []string{"AtMost", "AtLeast"} {
		t.Run(dir, func(t *testing.T) {
			d, rs := deployment(2)
			h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", "127.0.0.1", "1", "1Gi"), pod("web-b", "127.0.0.2", "1", "1Gi"))
			h.c.http = &http.Client{Timeout: 100 * time.Millisecond}
			spec := objectiveSpec(int32(port))
			spec["metric"].(map[string]any)["direction"] = dir
			h.createObjective(spec, nil)
			h.period()
			st := h.status()
			if dir == "AtLeast" {
				// 0.010 from web-b against a throughput target of 0.020: violated by 2×, measured.
				checkCondition(t, st, v1alpha1.ObjectiveMeasured, metav1.ConditionTrue, ReasonMeasured, "from 1 of 2 Ready pods")
				if st.LastDecisionReason != "Violated" {
					t.Errorf("decision %s/%s, want Grow/Violated", st.LastDecision, st.LastDecisionReason)
				}
				return
			}
			checkCondition(t, st, v1alpha1.ObjectiveMeasured, metav1.ConditionFalse, "Unresponsive", "1 of 2 Ready pods did not answer web_p99_seconds within the scrape timeout")
			checkCondition(t, st, v1alpha1.ObjectiveMet, metav1.ConditionFalse, ReasonTargetViolated, "decision Grow (Unresponsive)")
			// 2 × 1 core (the starting size) × 4: the pods at their 4-core maximum.
			checkSize(t, st, 2, "4", "4Gi", "40M")
			if st.LastDecision != "Grow" || st.LastMeasurement != nil || st.Smoothed != nil {
				t.Errorf("decision %s, measurement %v, smoothed %v; want Grow and no measurement", st.LastDecision, st.LastMeasurement, st.Smoothed)
			}
			if got := h.metric("finegrain_objective_violation_seconds_total", objLabels); got != 10 {
				t.Errorf("violation seconds %v, want one period (10)", got)
			}
		})
	}
	// Every pod stalls: a throughput objective is unresponsive too.
	d, rs := deployment(1)
	h := newHarness(t, DefaultOptions(), d, rs, pod("web-a", "127.0.0.1", "1", "1Gi"))
	h.c.http = &http.Client{Timeout: 100 * time.Millisecond}
	spec := objectiveSpec(int32(port))
	spec["metric"].(map[string]any)["direction"] = "AtLeast"
	h.createObjective(spec, nil)
	h.period()
	if st := h.status(); st.LastDecisionReason != "Unresponsive" {
		t.Errorf("throughput objective, no pod answering: decision %s/%s, want Grow/Unresponsive", st.LastDecision, st.LastDecisionReason)
	}
}

// Between periods the loop checks the metric every period/5: a check within the target decides
// and writes nothing; one past the target (or with pods that do not answer) calls for the period
// at once; none runs within a period of a size change; a period after a spec change comes at
// once.
func TestChecksBetweenPeriods(t *testing.T) {
	h, g, port := onePodHarness(t, 0.018)
	h.createObjective(objectiveSpec(port), oneCoreStatus())
	get := func() *unstructured.Unstructured {
		u, err := h.dyn.Resource(objectiveGVR).Namespace(ns).Get(t.Context(), "web-p99", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	// A period within the margin: the next reconcile is a check 2 s on.
	start := h.now
	if next := h.c.runPeriod(t.Context(), get(), start); !next.Equal(start.Add(2 * time.Second)) {
		t.Errorf("next after a holding period at %v, want %v", next.Sub(start), 2*time.Second)
	}
	p := h.c.pace["shop/web-p99"]
	if !p.period.Equal(start.Add(10*time.Second)) || !p.quietUntil.IsZero() {
		t.Errorf("pace %+v, want the period 10 s on and no quiet time", p)
	}
	before := h.status()

	// Within the target: nothing decided, nothing written, the target not read again (the check
	// scrapes the pods the period read).
	h.dyn.ClearActions()
	h.kube.ClearActions()
	hits := g.hits.Load()
	if violated, wait := h.c.check(t.Context(), get(), start.Add(2*time.Second), p); violated || wait != 2*time.Second {
		t.Errorf("check within the target: violated %v, wait %v", violated, wait)
	}
	if a := h.kube.Actions(); len(a) != 0 {
		t.Errorf("a check made %d calls to the API server, first %s %s", len(a), a[0].GetVerb(), a[0].GetResource().Resource)
	}
	if g.hits.Load() != hits+1 {
		t.Errorf("%d scrapes in a check, want 1", g.hits.Load()-hits)
	}
	for _, a := range h.dyn.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a check did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if got := h.status(); got.LastDecision != before.LastDecision || !slices.Equal(got.History.Samples, before.History.Samples) {
		t.Errorf("a check changed the status: %+v, was %+v", got.History, before.History)
	}
	if next := nextCheck(start.Add(8*time.Second), 2*time.Second, p.period); !next.Equal(p.period) {
		t.Errorf("a check due past the period: next at %v, want the period", next.Sub(start))
	}

	// Past the target: the check calls for the period, which grows the pods.
	g.set(0.030)
	if violated, _ := h.c.check(t.Context(), get(), start.Add(4*time.Second), p); !violated {
		t.Fatal("check past the target: not violated")
	}
	next := h.c.runPeriod(t.Context(), get(), start.Add(4*time.Second))
	if got := h.status(); got.LastDecision != "Grow" || got.PodSize.CPU.String() == "1" {
		t.Fatalf("decision %s, pod CPU %v; want a growth", got.LastDecision, got.PodSize.CPU.String())
	}
	p = h.c.pace["shop/web-p99"]
	if !p.quietUntil.Equal(start.Add(14*time.Second)) || !next.Equal(start.Add(6*time.Second)) {
		t.Errorf("after a growth: pace %+v, next at %v; want checks off until the next period", p, next.Sub(start))
	}

	// Within a period of the growth the metric still shows the old size: no scrape, no period.
	hits = g.hits.Load()
	if violated, wait := h.c.check(t.Context(), get(), start.Add(6*time.Second), p); violated || wait != 2*time.Second || g.hits.Load() != hits {
		t.Errorf("check after a growth: violated %v, wait %v, %d scrapes", violated, wait, g.hits.Load()-hits)
	}

	// An invalid spec is not checked.
	bad := get()
	if err := unstructured.SetNestedField(bad.Object, int64(0), "spec", "replicas", "max"); err != nil {
		t.Fatal(err)
	}
	if violated, wait := h.c.check(t.Context(), bad, start.Add(16*time.Second), p); violated || wait != 0 {
		t.Errorf("check of an invalid spec: violated %v, wait %v", violated, wait)
	}

	// A changed spec makes the next reconcile a period.
	h.c.forgetPace("shop/web-p99")
	if _, ok := h.c.pace["shop/web-p99"]; ok {
		t.Error("pace kept after forgetPace")
	}
}

// In the running loop a violation between two periods grows the service at the next check,
// before the period ends.
func TestRunGrowsAtACheck(t *testing.T) {
	h, g, port := onePodHarness(t, 0.018)
	spec := objectiveSpec(port)
	spec["periodSeconds"] = int64(30)
	h.createObjective(spec, oneCoreStatus())
	defer h.run()()
	waitFor(t, "the first period", func() bool { return h.status().LastDecision == "Hold" })
	g.set(0.030)
	waitFor(t, "a growth at a check (every 6 s), within the 30 s period", func() bool { return h.status().LastDecision == "Grow" })
}

// oneCoreStatus is the status of an objective that decided one pod of 1 CPU, 1Gi and 10M.
func oneCoreStatus() *v1alpha1.ServiceObjectiveStatus {
	return &v1alpha1.ServiceObjectiveStatus{Replicas: 1, PodSize: &v1alpha1.PodSize{
		CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), IOBandwidth: resource.MustParse("10M"),
	}}
}

// onePodHarness is a Deployment "web" of one pod of 1 CPU and 1Gi whose gauge reads v, and the
// port the gauge is served on.
func onePodHarness(t *testing.T, v float64) (*harness, *gaugeServer, int32) {
	g := newGaugeServer(t, v)
	ip, port := g.hostPort(t)
	d, rs := deployment(1)
	return newHarness(t, DefaultOptions(), d, rs, pod("web-a", ip, "1", "1Gi")), g, port
}
