package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

func TestJobIsBoundWhole(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(4, 18)...)
	h.createJob(hpcJob("lulesh", 16, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "lulesh") == v1alpha1.PhaseRunning })
	h.eventually("bound event", func() bool { return h.rec.find("Normal GangBound lulesh") })

	job := h.job("hpc", "lulesh")
	s := job.Status
	if s.Nodes != 4 || s.Workers != 4 || s.Groups != 4 || len(s.Placements) != 4 || s.StartTime == nil || s.SubmitTime == nil {
		t.Errorf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonBound ||
		c.Message != "bound 4 of 4 workers on 4 nodes" {
		t.Errorf("Scheduled condition %+v", c)
	}
	nodes := map[string]bool{}
	for _, p := range h.pods("hpc") {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s not bound", p.Name)
		}
		if p.Spec.SchedulerName != v1alpha1.DefaultSchedulerName {
			t.Errorf("pod %s scheduler %q", p.Name, p.Spec.SchedulerName)
		}
		if p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker {
			nodes[p.Spec.NodeName] = true
			if p.Annotations[v1alpha1.AnnotationNUMANode] != "0" || p.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive {
				t.Errorf("worker %s annotations %v labels %v", p.Name, p.Annotations, p.Labels)
			}
		}
	}
	if len(nodes) != 4 || len(h.pods("hpc")) != 5 {
		t.Errorf("%d pods on %d worker nodes, want 5 pods, workers on 4 nodes", len(h.pods("hpc")), len(nodes))
	}
	cm, err := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), "lulesh-hostfile", metav1.GetOptions{})
	if err != nil || !strings.HasPrefix(cm.Data["hostfile"], "lulesh-worker-0.lulesh-workers.hpc.svc slots=4\n") {
		t.Errorf("hostfile %v %v", cm, err)
	}
	if _, err := h.kube.CoreV1().Services("hpc").Get(context.Background(), "lulesh-workers", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if got := h.metric(h.c.metrics.BoundPods.WithLabelValues("worker")); got != 4 {
		t.Errorf("bound workers metric %v", got)
	}
	if !h.rec.find("Normal GangBound lulesh: bound 4 of 4 workers on 4 nodes") {
		t.Errorf("events %s", h.rec.all())
	}

	// The launcher ends: the job ends and its workers go.
	h.setPhase("hpc", "lulesh-launcher", corev1.PodSucceeded)
	h.eventually("job succeeded", func() bool { return h.phase("hpc", "lulesh") == v1alpha1.PhaseSucceeded })
	h.eventually("workers deleted", func() bool { return len(h.pods("hpc")) == 1 })
	if job := h.job("hpc", "lulesh"); job.Status.CompletionTime == nil || !meta.IsStatusConditionTrue(job.Status.Conditions, ConditionFinished) {
		t.Errorf("finished status %+v", job.Status)
	}
}

func TestInvalidJobGetsCondition(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createJob(hpcJob("bad", 4, func(s *v1alpha1.HPCJobSpec) { s.TaskResources.CPU.Set(0) }))
	h.eventually("job failed", func() bool { return h.phase("hpc", "bad") == v1alpha1.PhaseFailed })
	c := meta.FindStatusCondition(h.job("hpc", "bad").Status.Conditions, ConditionValid)
	if c == nil || c.Reason != ReasonInvalidSpec || !strings.Contains(c.Message, "spec.taskResources.cpu: Required value") {
		t.Errorf("Valid condition %+v", c)
	}
	if len(h.pods("hpc")) != 0 {
		t.Error("an invalid job got pods")
	}
	if !h.rec.find("Warning InvalidSpec bad") {
		t.Errorf("events %s", h.rec.all())
	}
}

// A gang that does not fit binds nothing, says why, and is placed when room appears.
func TestGangWaitsWholeThenFits(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createJob(hpcJob("big", 32, nil))
	h.eventually("unschedulable condition", func() bool {
		c := meta.FindStatusCondition(h.job("hpc", "big").Status.Conditions, ConditionScheduled)
		return c != nil && c.Reason == ReasonUnschedulable && strings.Contains(c.Message, "fits none of 1 nodes: 1 have insufficient cpu")
	})
	h.never("a pod of a gang that does not fit was created", 200*time.Millisecond, func() bool { return len(h.pods("hpc")) > 0 })
	if got := h.metric(h.c.metrics.GangFailures.WithLabelValues("cpu")); got < 1 {
		t.Errorf("cpu failures %v", got)
	}
	// Four more nodes join: scale spreads the job over all five (7, 7, 6, 6, 6 tasks).
	in := st.Uniform("n", 5, 2, 8, 64)
	for _, n := range in.Nodes[1:] {
		if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range in.Topologies[1:] {
		if _, err := h.dyn.Resource(nrt.GroupVersionResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("job running", func() bool { return h.phase("hpc", "big") == v1alpha1.PhaseRunning })
	if b, p := h.bound("hpc"); b != 6 || p != 0 {
		t.Errorf("%d bound, %d pending; want 5 workers and the launcher bound", b, p)
	}
}

// A job deleted and created again under the same name starts afresh.
func TestRecreatedJobStartsAfresh(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createJob(hpcJob("j", 4, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	jobs := h.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("hpc")
	if err := jobs.Delete(context.Background(), "j", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the garbage collector does: the old job's pods, Secret, ConfigMap and Service go.
	for _, p := range h.pods("hpc") {
		if err := h.kube.CoreV1().Pods("hpc").Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	core := h.kube.CoreV1()
	for _, err := range []error{
		core.Secrets("hpc").Delete(context.Background(), "j-ssh", metav1.DeleteOptions{}),
		core.ConfigMaps("hpc").Delete(context.Background(), "j-hostfile", metav1.DeleteOptions{}),
		core.Services("hpc").Delete(context.Background(), "j-workers", metav1.DeleteOptions{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	again := hpcJob("j", 4, nil)
	again.SetUID("uid-j-2")
	h.createJob(again)
	h.eventually("the new job running with its own pods", func() bool {
		j := h.job("hpc", "j")
		b, _ := h.bound("hpc")
		return j.UID == "uid-j-2" && j.Status.Phase == v1alpha1.PhaseRunning && b == 2
	})
}
