package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKubeSpreadsLeastAllocated: kube-scheduler's least-allocated scoring puts a job's two
// containers on different empty nodes and the next job on the emptier node; the static CPU
// manager packs each container NUMA-first; releasing gives everything back.
func TestKubeSpreadsLeastAllocated(t *testing.T) {
	jobs := readTestTrace(t, "e2e-4jobs.yaml")
	k := newKube(strategy(t, StrategyKubeStatic), paperMachine(t), 3, 1, len(jobs))
	c := &run{job: &jobs[2], index: 2}
	att, err := k.place(c)
	if err != nil || len(att.workers) != 2 {
		t.Fatalf("job c: %+v, %v", att, err)
	}
	if att.workers[0].Node != 0 || att.workers[1].Node != 1 || !cmp.Equal(att.workers[0].CPUs, []int{3, 0}) {
		t.Errorf("job c's containers: %+v", att.workers)
	}
	a := &run{job: &jobs[0], index: 0}
	if att, err = k.place(a); err != nil || att.workers[0].Node != 2 {
		t.Errorf("job a went to %+v, %v; want the empty node-003", att.workers, err)
	}
	if err := k.verify(); err != nil {
		t.Fatal(err)
	}
	if err := k.release(c); err != nil {
		t.Fatal(err)
	}
	if err := k.release(a); err != nil {
		t.Fatal(err)
	}
	for i, n := range k.nodes {
		if n.reqMilli != 0 || !cmp.Equal(k.perNUMA(n.free), []int{17, 18}) {
			t.Errorf("node %d after release: %+v", i, n)
		}
	}
}
