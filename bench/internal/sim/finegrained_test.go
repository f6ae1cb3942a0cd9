package sim

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFinegrainedJobs(t *testing.T) {
	one := Finegrained1Jobs()
	if len(one) != 10 || one[9].Arrival != 540*time.Second || one[9].Spec.Tasks != 16 || one[9].Name != "ep-dgemm-10" {
		t.Errorf("experiment 1: %d jobs, last %+v", len(one), one[len(one)-1])
	}
	a, b := Finegrained2Jobs(3), Finegrained2Jobs(3)
	if len(a) != 20 {
		t.Fatalf("experiment 2: %d jobs, want 20", len(a))
	}
	kinds := map[string]bool{}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Arrival != b[i].Arrival {
			t.Fatalf("seed 3 drew two job sets: %s@%v vs %s@%v", a[i].Name, a[i].Arrival, b[i].Name, b[i].Arrival)
		}
		if a[i].Arrival < 0 || a[i].Arrival > 1200*time.Second || (i > 0 && a[i].Arrival < a[i-1].Arrival) {
			t.Errorf("job %s arrives at %v (previous %v): want 0–1200 s in order", a[i].Name, a[i].Arrival, a[max(i-1, 0)].Arrival)
		}
		kinds[a[i].Name[:strings.LastIndex(a[i].Name, "-")]] = true
	}
	if len(kinds) < 3 {
		t.Errorf("seed 3 drew only %v", kinds)
	}
	if c := Finegrained2Jobs(4); c[0].Name == a[0].Name && c[0].Arrival == a[0].Arrival && c[19].Arrival == a[19].Arrival {
		t.Errorf("seeds 3 and 4 drew the same job set")
	}
}

// Every scenario of Table II runs every job (allocator invariants checked after every event), and
// task groups off changes where the placer puts workers: on seed 0 some job's workers span a
// different number of nodes with and without them.
func TestRunFinegrainedScenarios(t *testing.T) {
	opts := Options{Machine: paperMachine(t), Nodes: FinegrainedNodes, Model: DefaultModel(), Queue: DefaultQueueOptions(),
		SnapshotTTL: DefaultSnapshotTTL, SystemReservedCPUs: FinegrainedReserved, Verify: true}
	res, err := RunFinegrained(Finegrained2Jobs(0), opts, 2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	by := map[string]*FinegrainedResult{}
	for i := range res {
		names = append(names, res[i].Scenario)
		by[res[i].Scenario] = &res[i]
		if m := res[i].Metrics; m.Utilization <= 0 || m.Utilization > 1 || m.WeightedMeanCompletion <= m.WeightedMeanResponse {
			t.Errorf("%s: %+v", res[i].Scenario, m)
		}
	}
	if !slices.Equal(names, []string{"NONE", "CM", "CM_S", "CM_G", "CM_S_TG", "CM_G_TG"}) {
		t.Fatalf("scenarios %v", names)
	}
	for _, pair := range [][2]string{{"CM_S", "CM_S_TG"}, {"CM_G", "CM_G_TG"}} {
		off, on := by[pair[0]], by[pair[1]]
		differ := false
		for i := range off.Jobs {
			differ = differ || off.Jobs[i].Nodes != on.Jobs[i].Nodes
		}
		if !differ {
			t.Errorf("%s and %s put every job on as many nodes: task groups off changed nothing", pair[0], pair[1])
		}
	}
}
