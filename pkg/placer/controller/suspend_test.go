package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// setSuspend writes the job's runPolicy.suspend, as kubectl patch would.
func (h *harness) setSuspend(name string, suspend bool) {
	h.t.Helper()
	jobs := h.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("hpc")
	u, err := jobs.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, suspend, "spec", "runPolicy", "suspend"); err != nil {
		h.t.Fatal(err)
	}
	if _, err := jobs.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// A running job that is suspended loses every pod and its placements but stays, Suspended; once
// resumed it is placed again whole, with the Suspended condition False.
func TestSuspendAndResume(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 8), hpcJob("s", 8, nil))...)
	h.eventually("the job running", func() bool { return h.phase("hpc", "s") == v1alpha1.PhaseRunning })
	if b, _ := h.jobPodsOf("s"); b == 0 {
		t.Fatal("the running job has no bound pods")
	}
	h.setSuspend("s", true)
	h.eventually("the job suspended without pods", func() bool {
		b, p := h.jobPodsOf("s")
		return h.phase("hpc", "s") == v1alpha1.PhaseSuspended && b+p == 0
	})
	st := h.job("hpc", "s").Status
	if len(st.Placements) != 0 || st.StartTime != nil || st.Workers != 0 {
		t.Errorf("suspended status keeps its run: %+v", st)
	}
	if c := h.condition("hpc", "s", ConditionSuspended); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonSuspended {
		t.Errorf("Suspended condition %+v", c)
	}
	h.eventually("the Suspended event", func() bool { return h.rec.find("Normal Suspended s: suspended: ") })

	h.setSuspend("s", false)
	h.eventually("the job running again", func() bool { return h.phase("hpc", "s") == v1alpha1.PhaseRunning })
	if c := h.condition("hpc", "s", ConditionSuspended); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonResumed {
		t.Errorf("Suspended condition after resuming %+v", c)
	}
	if b, p := h.jobPodsOf("s"); b == 0 || p != 0 {
		t.Errorf("resumed job: %d bound, %d pending", b, p)
	}
	h.eventually("the Resumed event", func() bool { return h.rec.find("Normal Resumed s: ") })
}

// A job created suspended is never placed; its cores stay free for others.
func TestCreatedSuspended(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 8), hpcJob("first", 8, func(s *v1alpha1.HPCJobSpec) { s.RunPolicy.Suspend = true }),
		hpcJob("second", 8, nil))...)
	h.eventually("second running", func() bool { return h.phase("hpc", "second") == v1alpha1.PhaseRunning })
	if ph := h.phase("hpc", "first"); ph != v1alpha1.PhaseSuspended {
		t.Errorf("first is %s, want Suspended", ph)
	}
	if b, p := h.jobPodsOf("first"); b+p != 0 {
		t.Errorf("the suspended job has %d pods", b+p)
	}
	if c := h.condition("hpc", "first", ConditionValid); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Valid condition %+v", c)
	}
}
