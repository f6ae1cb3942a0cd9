package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
)

// submittedAgo backdates a job's creation, the start of its wait.
func submittedAgo(d time.Duration, u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetCreationTimestamp(metav1.NewTime(time.Now().Add(-d)))
	return u
}

// Options.Aging orders the queue by aged priority: a job of priority 1 submitted two hours ago
// gains 20 at 10 per hour and is placed before a job of priority 10 submitted now (the first placed
// takes NUMA node 0); with aging off, priority alone orders them.
func TestAgingOrdersTheQueue(t *testing.T) {
	for _, perHour := range []float64{0, 10} {
		t.Run(fmt.Sprintf("aging=%v", perHour), func(t *testing.T) {
			opts := testOptions()
			opts.Aging = elastic.Aging{PerHour: perHour}
			objs := append(cluster(1, 9), priorityClass("p10", 10, false), priorityClass("p1", 1, false),
				submittedAgo(2*time.Hour, hpcJob("old", 8, withClass("p1"))), hpcJob("new", 8, withClass("p10")))
			h := newHarness(t, opts, objs...)
			for _, j := range []string{"old", "new"} {
				h.eventually(j+" running", func() bool { return h.phase("hpc", j) == v1alpha1.PhaseRunning })
			}
			first := "new"
			if perHour > 0 {
				first = "old"
			}
			if s := h.job("hpc", first).Status; s.Placements[0].NUMANode != 0 {
				t.Errorf("%s took NUMA node %d; it is placed first, on NUMA node 0", first, s.Placements[0].NUMANode)
			}
		})
	}
}

// Aging gives no right to shrink: a job of priority -1 that has waited two hours at 1000 per hour
// (aged far above the elastic job's 0) shrinks nothing, where its own priority would not either,
// for longer than the elastic job's 1 s rescale gap.
func TestAgingNeverShrinks(t *testing.T) {
	opts := testOptions()
	opts.Aging = elastic.Aging{PerHour: 1000}
	h := shrinkScene(t, opts, priorityClass("low", -1, false))
	h.createJob(inNamespace("team-b", submittedAgo(2*time.Hour, hpcJob("patient", 8, network(func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "low"
		s.Gang.TimeoutSeconds = 3 * 3600 // not timed out by its two hours
	})))))
	h.eventually("patient waits", func() bool { return h.rec.find("Warning Unschedulable patient") })
	h.never("the elastic job was shrunk for an aged priority", 1500*time.Millisecond, func() bool {
		return h.job("team-b", "el").Status.Workers != 4 || len(h.hooks().calls()) != 0
	})
	if p := h.phase("team-b", "patient"); p != v1alpha1.PhasePending {
		t.Errorf("patient is %s, want Pending", p)
	}
}
