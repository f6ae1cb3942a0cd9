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

// Under the topology manager's best-effort policy a container that fits one NUMA node gets its
// CPUs there; without it the static CPU manager packs the fullest NUMA node first and spans. On
// one node (NUMA node 0 holds the reserved CPU: 17 + 18 free) a 12-CPU container leaves 5 free
// on NUMA node 0 either way; an 8-CPU one then takes 5 + 3 under k8s-static and 0 + 8 under
// k8s-static-besteffort; a 20-CPU one fits no NUMA node and spans under both.
func TestKubeStaticBestEffortAligns(t *testing.T) {
	jobs, err := DecodeTrace([]byte(`jobs:
- {name: a, arrival: 0, runtime: 60, tasks: 12, workers: 1, taskResources: {cpu: 1, memory: 1Gi}}
- {name: b, arrival: 0, runtime: 60, tasks: 8, workers: 1, taskResources: {cpu: 1, memory: 1Gi}}
- {name: c, arrival: 0, runtime: 60, tasks: 20, workers: 1, taskResources: {cpu: 1, memory: 1Gi}}
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strategy string
		b        []int
	}{{StrategyKubeStatic, []int{5, 3}}, {StrategyKubeStaticBestEffort, []int{0, 8}}} {
		k := newKube(strategy(t, tc.strategy), paperMachine(t), 1, 1, len(jobs))
		var got [][]int
		for i := range jobs {
			att, err := k.place(&run{job: &jobs[i], index: i})
			if err != nil || len(att.workers) != 1 {
				t.Fatalf("%s: job %s: %+v, %v", tc.strategy, jobs[i].Name, att, err)
			}
			got = append(got, att.workers[0].CPUs)
			if i == 1 {
				if err := k.release(&run{job: &jobs[0], index: 0}); err != nil {
					t.Fatal(err)
				}
				if err := k.release(&run{job: &jobs[1], index: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !cmp.Equal(got[0], []int{12, 0}) || !cmp.Equal(got[1], tc.b) || got[2][0] == 0 || got[2][1] == 0 {
			t.Errorf("%s: CPUs per NUMA node of a, b, c = %v; want [12 0], %v, c spanning both", tc.strategy, got, tc.b)
		}
		if err := k.verify(); err != nil {
			t.Error(err)
		}
	}
}
