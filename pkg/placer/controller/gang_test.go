package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// jobPodsOf counts a job's bound and pending pods.
func (h *harness) jobPodsOf(job string) (bound, pending int) {
	for _, p := range h.pods("hpc") {
		if p.Labels[v1alpha1.LabelJob] != job {
			continue
		}
		if p.Spec.NodeName != "" {
			bound++
		} else {
			pending++
		}
	}
	return bound, pending
}

// Two gangs that cannot both fit (20 one-CPU workers each, 32 CPUs): one is bound whole, the
// other creates nothing and waits; when the first ends, the second is bound whole. (Pods of a
// gang being bound appear one by one; what must never happen is a gang left part bound, or
// the waiting gang holding anything.)
func TestTwoGangsNeverDeadlock(t *testing.T) {
	fine := func(s *v1alpha1.HPCJobSpec) { s.Granularity = v1alpha1.GranularityFine }
	objs := append(cluster(2, 8), hpcJob("a", 20, fine), hpcJob("b", 20, fine))
	h := newHarness(t, testOptions(), objs...)
	whole := func(j string) {
		if b, p := h.jobPodsOf(j); b != 21 || p != 0 {
			t.Fatalf("running job %s: %d bound, %d pending; want 21 bound", j, b, p)
		}
	}
	h.eventually("one job running", func() bool {
		return h.phase("hpc", "a") == v1alpha1.PhaseRunning || h.phase("hpc", "b") == v1alpha1.PhaseRunning
	})
	first, second := "a", "b"
	if h.phase("hpc", "b") == v1alpha1.PhaseRunning {
		first, second = "b", "a"
	}
	whole(first)
	h.never("the waiting gang got pods", 300*time.Millisecond, func() bool {
		b, p := h.jobPodsOf(second)
		return b+p > 0
	})
	if c := meta.FindStatusCondition(h.job("hpc", second).Status.Conditions, ConditionScheduled); c == nil || c.Reason != ReasonUnschedulable {
		t.Errorf("waiting job condition %+v", c)
	}
	h.setPhase("hpc", first+"-launcher", corev1.PodSucceeded)
	h.eventually("second job running", func() bool { return h.phase("hpc", second) == v1alpha1.PhaseRunning })
	whole(second)
}

// Higher priority goes first; a gang that cannot fit never blocks a smaller one behind it.
func TestPriorityAndNoHeadOfLineBlocking(t *testing.T) {
	objs := append(cluster(1, 9), priorityClass("p100", 100, false), priorityClass("p10", 10, false), priorityClass("p1", 1, false),
		hpcJob("huge", 64, withClass("p100")), hpcJob("low", 8, withClass("p1")), hpcJob("high", 8, withClass("p10")))
	h := newHarness(t, testOptions(), objs...)
	h.eventually("high running", func() bool { return h.phase("hpc", "high") == v1alpha1.PhaseRunning })
	h.eventually("low running", func() bool { return h.phase("hpc", "low") == v1alpha1.PhaseRunning })
	if s := h.job("hpc", "high").Status; s.Placements[0].NUMANode != 0 {
		t.Errorf("high took NUMA node %d; the first placed takes NUMA node 0", s.Placements[0].NUMANode)
	}
	if s := h.job("hpc", "low").Status; s.Placements[0].NUMANode != 1 {
		t.Errorf("low took NUMA node %d, want 1 (node 0 is high's)", s.Placements[0].NUMANode)
	}
	if h.phase("hpc", "huge") != v1alpha1.PhasePending {
		t.Errorf("huge is %s", h.phase("hpc", "huge"))
	}
}

func TestGangTimeout(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 8), hpcJob("big", 64, func(s *v1alpha1.HPCJobSpec) { s.Gang.TimeoutSeconds = 1 }))...)
	h.eventually("timeout condition", func() bool {
		c := meta.FindStatusCondition(h.job("hpc", "big").Status.Conditions, ConditionScheduled)
		return c != nil && c.Reason == ReasonGangTimeout
	})
	if got := h.metric(h.c.metrics.GangFailures.WithLabelValues("timeout")); got != 1 {
		t.Errorf("timeout failures %v, want 1", got)
	}
	h.eventually("timeout event", func() bool { return h.rec.find("Warning GangTimeout big") })
}

// A binding that fails undoes the whole gang, which is then placed again.
func TestBindFailureRollsBack(t *testing.T) {
	h := newHarness(t, testOptions())
	h.mu.Lock()
	h.failBind["j-worker-2"] = 1
	h.mu.Unlock()
	for _, o := range cluster(4, 8) {
		h.create(o)
	}
	h.createJob(hpcJob("j", 16, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.eventually("bind failure event", func() bool { return h.rec.find("Warning BindFailed j") })
	if got := h.metric(h.c.metrics.GangFailures.WithLabelValues("bind")); got != 1 {
		t.Errorf("bind failures %v", got)
	}
	if b, p := h.jobPodsOf("j"); b != 5 || p != 0 {
		t.Errorf("%d bound, %d pending", b, p)
	}
}

func (h *harness) create(o runtime.Object) {
	h.t.Helper()
	var err error
	switch x := o.(type) {
	case *corev1.Node:
		_, err = h.kube.CoreV1().Nodes().Create(context.Background(), x, metav1.CreateOptions{})
	case *unstructured.Unstructured:
		_, err = h.dyn.Resource(nrt.GroupVersionResource).Create(context.Background(), x, metav1.CreateOptions{})
	case *schedulingv1.PriorityClass:
		_, err = h.kube.SchedulingV1().PriorityClasses().Create(context.Background(), x, metav1.CreateOptions{})
	default:
		h.t.Fatalf("create %T: the harness does not know this kind", o)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

func TestPlainPodGang(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 8)...)
	mk := func(name, min, cpu string) *corev1.Pod {
		p := st.Pod("ml", name, "", cpu, "1Gi", true)
		p.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
		p.Labels[v1alpha1.LabelPodGroup] = "train"
		p.Labels[v1alpha1.LabelPodGroupMinAvailable] = min
		p.Annotations[v1alpha1.AnnotationNUMANode] = "7"
		return p
	}
	// Two of three pods exist: the gang waits for the third.
	h.createPod(mk("p0", "3", "4"))
	h.createPod(mk("p1", "3", "4"))
	h.never("an incomplete gang was bound", 200*time.Millisecond, func() bool { b, _ := h.bound("ml"); return b > 0 })
	h.createPod(mk("p2", "3", "4"))
	h.eventually("gang bound", func() bool { b, _ := h.bound("ml"); return b == 3 })
	for _, p := range h.pods("ml") {
		if a := p.Annotations[v1alpha1.AnnotationNUMANode]; a != "0" && a != "1" {
			t.Errorf("pod %s NUMA annotation %q: the placer must overwrite the author's value", p.Name, a)
		}
	}
	h.eventually("scheduled event", func() bool { return h.rec.find("Normal Scheduled p0: Successfully assigned ml/p0 to n-") })

	// A gang of three 8-CPU pods does not fit what is left (one free NUMA node of 8 plus
	// fragments): none is bound.
	big := func(name string) *corev1.Pod {
		p := mk(name, "3", "8")
		p.Labels[v1alpha1.LabelPodGroup] = "big"
		return p
	}
	for _, n := range []string{"b0", "b1", "b2"} {
		h.createPod(big(n))
	}
	h.eventually("failure event", func() bool { return h.rec.find("Warning Unschedulable b0") })
	h.never("part of a gang that does not fit was bound", 200*time.Millisecond, func() bool { b, _ := h.bound("ml"); return b > 3 })
}

func TestLonePodAndSharedPod(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	pinned := st.Pod("web", "db", "", "2", "1Gi", true)
	pinned.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	shared := st.Pod("web", "api", "", "500m", "1Gi", false)
	shared.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	shared.Annotations[v1alpha1.AnnotationNUMANode] = "1"
	other := st.Pod("web", "not-ours", "", "1", "1Gi", false)
	h.createPod(pinned)
	h.createPod(shared)
	h.createPod(other)
	h.eventually("both bound", func() bool { b, _ := h.bound("web"); return b == 2 })
	for _, p := range h.pods("web") {
		switch p.Name {
		case "db":
			if p.Annotations[v1alpha1.AnnotationNUMANode] != "0" {
				t.Errorf("db annotations %v", p.Annotations)
			}
		case "api":
			if _, ok := p.Annotations[v1alpha1.AnnotationNUMANode]; ok {
				t.Errorf("shared pod keeps its author's NUMA annotation %v", p.Annotations)
			}
		case "not-ours":
			if p.Spec.NodeName != "" {
				t.Error("bound a pod of another scheduler")
			}
		}
	}
	// The pinned pod is annotated by its binding, in one call; only removing the shared pod's
	// annotation takes a patch.
	patched := map[string]int{}
	for _, a := range h.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetResource().Resource == "pods" {
			patched[p.GetName()]++
		}
	}
	if patched["db"] != 0 || patched["api"] != 1 {
		t.Errorf("patches per pod %v, want none for db and one for api", patched)
	}
}

// A job left half made by an interrupted placer (pods of the job exist, status Pending) starts over.
func TestInterruptedAttemptStartsOver(t *testing.T) {
	stale := ownedBy(st.Pod("hpc", "j-worker-0", "n-0000", "4", "4Gi", true), "j")
	stale.Labels[v1alpha1.LabelJob], stale.Labels[v1alpha1.LabelRole] = "j", v1alpha1.RoleWorker
	h := newHarness(t, testOptions(), append(cluster(4, 8), hpcJob("j", 16, nil), stale)...)
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	if b, p := h.jobPodsOf("j"); b != 5 || p != 0 {
		t.Errorf("%d bound, %d pending", b, p)
	}
}

// A job whose minAvailable let it start without a worker places that worker when room appears.
func TestMinAvailableJobCompletesLater(t *testing.T) {
	two := int32(2)
	job := hpcJob("j", 24, func(s *v1alpha1.HPCJobSpec) {
		s.Granularity, s.Workers, s.Gang.MinAvailable = v1alpha1.GranularityNone, 3, &two
	})
	h := newHarness(t, testOptions(), append(cluster(1, 9), job)...)
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	if b, p := h.jobPodsOf("j"); b != 3 || p != 1 {
		t.Fatalf("%d bound, %d pending; want 2 workers and the launcher bound, 1 worker waiting", b, p)
	}
	in := st.Uniform("n", 2, 2, 9, 64)
	h.create(in.Nodes[1])
	h.create(in.Topologies[1])
	h.eventually("third worker bound", func() bool { b, p := h.jobPodsOf("j"); return b == 4 && p == 0 })
	h.eventually("status lists 3 placements on 2 nodes", func() bool {
		s := h.job("hpc", "j").Status
		return len(s.Placements) == 3 && s.Nodes == 2
	})
}

func TestEventsNameTheFitProblem(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 8), hpcJob("j", 9, func(s *v1alpha1.HPCJobSpec) {
		s.Profile = v1alpha1.ProfileNetwork
		s.Worker.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	}))...)
	h.eventually("event", func() bool { return h.rec.find("do not match the nodeSelector disk=ssd") })
	if !strings.Contains(meta.FindStatusCondition(h.job("hpc", "j").Status.Conditions, ConditionScheduled).Message, "nodeSelector disk=ssd") {
		t.Error("condition does not name the selector")
	}
}
