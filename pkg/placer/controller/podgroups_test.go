package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// createPodGroup makes a PodGroup in namespace ml.
func (h *harness) createPodGroup(name string, spec schedv1alpha1.PodGroupSpec) {
	h.t.Helper()
	pg := schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.GroupName + "/" + schedv1alpha1.Version, Kind: schedv1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: k8stypes.UID("uid-pg-" + name)},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pg)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace("ml").Create(context.Background(),
		&unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// podGroupStatus reads a PodGroup's status from the fake API server.
func (h *harness) podGroupStatus(name string) schedv1alpha1.PodGroupStatus {
	h.t.Helper()
	u, err := h.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace("ml").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	pg, err := schedv1alpha1.FromUnstructured(u)
	if err != nil {
		h.t.Fatal(err)
	}
	return pg.Status
}

// groupPod is a pinned pod of cpu CPUs in group of namespace ml, labelled with label.
func groupPod(name, label, group, cpu string) *corev1.Pod {
	p := st.Pod("ml", name, "", cpu, "1Gi", true)
	p.UID = k8stypes.UID("uid-pod-" + name)
	p.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	p.Labels[label] = group
	return p
}

func (h *harness) boundIn(group string) (bound, pending int) {
	for _, p := range h.pods("ml") {
		if g, _, _ := schedv1alpha1.GroupOf(&p); g != group {
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

// Pods labelled scheduling.x-k8s.io/pod-group wait for their PodGroup, then for minMember pods,
// and are bound all together; the placer reports the group's phase and pod counts.
func TestPodGroupGang(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 8)...)
	h.createPod(groupPod("p0", schedv1alpha1.LabelPodGroup, "train", "4"))
	h.createPod(groupPod("p1", schedv1alpha1.LabelPodGroup, "train", "4"))
	h.eventually("an event saying the PodGroup is missing", func() bool {
		return h.rec.find("Warning Unschedulable p0: pods of namespace ml are labelled scheduling.x-k8s.io/pod-group=train but there is no PodGroup train there")
	})
	h.createPodGroup("train", schedv1alpha1.PodGroupSpec{MinMember: 3})
	h.never("a gang short of minMember was bound", 200*time.Millisecond, func() bool { b, _ := h.boundIn("train"); return b > 0 })
	if s := h.podGroupStatus("train"); s.Phase != schedv1alpha1.PhasePending || s.ScheduleStartTime == nil {
		t.Errorf("status %+v, want Pending with a schedule start time", s)
	}
	h.createPod(groupPod("p2", schedv1alpha1.LabelPodGroup, "train", "4"))
	h.eventually("the gang bound", func() bool { b, _ := h.boundIn("train"); return b == 3 })
	h.eventually("phase Scheduling", func() bool { return h.podGroupStatus("train").Phase == schedv1alpha1.PhaseScheduling })
	for _, p := range []string{"p0", "p1", "p2"} {
		h.setPhase("ml", p, corev1.PodRunning)
	}
	h.eventually("phase Running", func() bool {
		s := h.podGroupStatus("train")
		return s.Phase == schedv1alpha1.PhaseRunning && s.Running == 3
	})
	h.setPhase("ml", "p1", corev1.PodFailed)
	h.eventually("phase Failed", func() bool {
		s := h.podGroupStatus("train")
		return s.Phase == schedv1alpha1.PhaseFailed && s.Running == 2 && s.Failed == 1
	})
	if h.rec.find(ReasonDeprecatedLabel) {
		t.Errorf("a deprecation warning for the standard label:\n%s", h.rec.all())
	}
}

// A PodGroup whose minMember pods cannot fit together binds none of them, even though some
// would fit; a minMember below the pod count binds that many.
func TestPodGroupNeverHalfBinds(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createPodGroup("big", schedv1alpha1.PodGroupSpec{MinMember: 3})
	for _, n := range []string{"b0", "b1", "b2"} {
		h.createPod(groupPod(n, schedv1alpha1.LabelPodGroup, "big", "8"))
	}
	h.eventually("a failure event", func() bool { return h.rec.find("Warning Unschedulable b0") })
	h.never("part of the gang bound", 300*time.Millisecond, func() bool { b, _ := h.boundIn("big"); return b > 0 })
	if s := h.podGroupStatus("big"); s.Phase != schedv1alpha1.PhasePending {
		t.Errorf("phase %s, want Pending", s.Phase)
	}
}

// minResources holds the group back while the cluster has less free; scheduleTimeoutSeconds
// is the group's gang timeout.
func TestPodGroupMinResourcesAndTimeout(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createPodGroup("res", schedv1alpha1.PodGroupSpec{MinMember: 1, ScheduleTimeoutSeconds: ptr.To[int32](1),
		MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}})
	h.createPod(groupPod("r0", schedv1alpha1.LabelPodGroup, "res", "1"))
	h.eventually("the minResources event", func() bool {
		return h.rec.find("Warning Unschedulable r0: PodGroup ml/res: the cluster has less free than its minResources: cpu 100 (free 16000m)")
	})
	h.eventually("the group's timeout", func() bool { return h.rec.find("Warning GangTimeout r0") })
	if b, _ := h.boundIn("res"); b != 0 {
		t.Errorf("%d pods bound short of minResources", b)
	}
}

// The deprecated label still makes a gang (its size from the min-available label), with one
// warning event on each of its pods.
func TestDeprecatedPodGroupLabel(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	for _, n := range []string{"o0", "o1"} {
		p := groupPod(n, schedv1alpha1.DeprecatedLabelPodGroup, "old", "2")
		p.Labels[v1alpha1.LabelPodGroupMinAvailable] = "2"
		h.createPod(p)
	}
	h.eventually("the old gang bound", func() bool { b, _ := h.boundIn("old"); return b == 2 })
	want := "Warning DeprecatedPodGroupLabel o0: label pod-group.scheduling.x-k8s.io/name=old is deprecated: label the pod scheduling.x-k8s.io/pod-group=old and create PodGroup old"
	h.eventually("the deprecation warning", func() bool { return h.rec.find(want) })
	if n := strings.Count(h.rec.all(), "DeprecatedPodGroupLabel o0:"); n != 1 {
		t.Errorf("%d deprecation warnings on o0, want 1:\n%s", n, h.rec.all())
	}
}

// A PodGroup as MPI Operator's scheduler-plugins gang option writes it (minMember the workers
// and the launcher, scheduleTimeoutSeconds 0, minResources the sum of their requests), its
// pinned workers made first and its shared-pool launcher later (the launcher's Job makes that
// pod): the group is valid, no worker is bound before the launcher is there, then the three are
// bound together, each worker on one NUMA node, and the group waits the placer's --gang-timeout,
// not no time.
func TestPodGroupOfMPIOperator(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 4)...)
	h.createPodGroup("pi", schedv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: ptr.To[int32](0),
		MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8100m"), corev1.ResourceMemory: resource.MustParse("2176Mi")}})
	h.createPod(groupPod("pi-worker-0", schedv1alpha1.LabelPodGroup, "pi", "4"))
	h.createPod(groupPod("pi-worker-1", schedv1alpha1.LabelPodGroup, "pi", "4"))
	h.never("a worker bound before the launcher exists", 200*time.Millisecond, func() bool { b, _ := h.boundIn("pi"); return b > 0 })
	launcher := st.Pod("ml", "pi-launcher-x7k2q", "", "100m", "128Mi", false)
	launcher.UID = k8stypes.UID("uid-pod-pi-launcher")
	launcher.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	launcher.Labels[schedv1alpha1.LabelPodGroup] = "pi"
	h.createPod(launcher)
	h.eventually("the gang bound", func() bool { b, _ := h.boundIn("pi"); return b == 3 })
	var pods []*corev1.Pod
	for _, p := range h.pods("ml") {
		pods = append(pods, &p)
		_, numa := p.Annotations[v1alpha1.AnnotationNUMANode]
		if pinned := p.Labels[v1alpha1.LabelPinning] == v1alpha1.PinningExclusive; numa != pinned {
			t.Errorf("pod %s (pinned %v) has NUMA node annotation %q", p.Name, pinned, p.Annotations[v1alpha1.AnnotationNUMANode])
		}
	}
	if all := h.rec.all(); strings.Contains(all, "invalid") || strings.Contains(all, "GangTimeout") {
		t.Errorf("events:\n%s", all)
	}
	if got := h.c.gangTimeout("pod group ml/pi", pods); got != time.Minute {
		t.Errorf("gang timeout %v, want the placer's --gang-timeout %v", got, time.Minute)
	}
}
