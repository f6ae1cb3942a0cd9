package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// paperNUMA is one node of the paper's machine: two NUMA nodes of 18 CPUs.
var paperNUMA = []int{18, 18}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func factorsOf(m Model, nodes int, jobs []Running, i int) Factors {
	return m.Slowdown(m.NewLoad(paperNUMA, nodes, jobs), &jobs[i])
}

func TestSlowdownFactors(t *testing.T) {
	m := DefaultModel()
	mem, cpu, net := v1alpha1.ProfileMemory, v1alpha1.ProfileCPU, v1alpha1.ProfileNetwork
	pinned := func(node, tasks, numa int) Placed {
		c := make([]int, 2)
		c[numa] = tasks
		return Placed{Node: node, Tasks: tasks, Threads: tasks, CPUs: c}
	}
	floating := func(node, tasks int) Placed { return Placed{Node: node, Tasks: tasks, Threads: tasks} }
	for _, tc := range []struct {
		name  string
		jobs  []Running
		nodes int
		want  Factors
	}{{
		name: "pinned on one NUMA node, alone, below saturation: nothing",
		jobs: []Running{{Profile: mem, Workers: []Placed{pinned(0, 4, 0)}}},
		want: Factors{NUMA: 1, Bandwidth: 1, Interference: 1, Comm: 1, Total: 1},
	}, {
		// 16 threads over 2 × 18 CPUs: half their memory remote, 16 × 0.125 / 2 = 1 of each NUMA
		// node's bandwidth, the pool 16/36 busy, 8 + 8 tasks: (240 − 112) / 240 pairs cross NUMA.
		name: "floating memory job over the whole node",
		jobs: []Running{{Profile: mem, Workers: []Placed{floating(0, 16)}}},
		want: Factors{NUMA: 1 + 0.9*0.5*0.8, Bandwidth: 1, Interference: 1 + 0.06*16.0/36,
			Comm: 1 + 0.02*(128.0/240)*0.3},
	}, {
		name: "two pinned memory workers saturate one NUMA node (demand 2.25)",
		jobs: []Running{
			{Profile: mem, Workers: []Placed{pinned(0, 9, 0)}},
			{Profile: mem, Workers: []Placed{pinned(0, 9, 0)}},
		},
		want: Factors{NUMA: 1, Bandwidth: 0.1 + 0.9*2.25, Interference: 1, Comm: 1},
	}, {
		name: "oversubscribed pool: 72 busy threads on 36 CPUs",
		jobs: []Running{
			{Profile: cpu, Workers: []Placed{floating(0, 36)}},
			{Profile: cpu, Workers: []Placed{floating(0, 36)}},
		},
		want: Factors{NUMA: 1 + 0.1*0.5*0.8, Bandwidth: 0.9 + 0.1*max(1, 0.02*72/2), Interference: 2 * 1.1,
			Comm: 1 + 0.02*((36*35-2*18*17)/(36.0*35))*0.3},
	}, {
		// 4 + 4 tasks on two nodes: 24 of 56 pairs on one node.
		name:  "network job split over two nodes",
		jobs:  []Running{{Profile: net, Workers: []Placed{pinned(0, 4, 0), pinned(1, 4, 1)}}},
		nodes: 2,
		want:  Factors{NUMA: 1, Bandwidth: 1, Interference: 1, Comm: 1 + 0.6*(32.0/56)*4},
	}, {
		// The static CPU manager gave 10 CPUs on NUMA 0 and 6 on NUMA 1: threads float inside.
		name: "pinned worker spanning NUMA nodes",
		jobs: []Running{{Profile: mem, Workers: []Placed{{Node: 0, Tasks: 16, Threads: 16, CPUs: []int{10, 6}}}}},
		want: Factors{NUMA: 1 + 0.9*(1-(0.625*0.625+0.375*0.375))*0.8,
			Bandwidth: 0.1 + 0.9*(0.625*max(1, 0.125*10)+0.375*1), Interference: 1,
			Comm: 1 + 0.02*((16*15-(10*9+6*5))/(16.0*15))*0.3},
	}, {
		name: "single task: no communication",
		jobs: []Running{{Profile: net, Workers: []Placed{pinned(0, 1, 0)}}},
		want: Factors{NUMA: 1, Bandwidth: 1, Interference: 1, Comm: 1, Total: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := factorsOf(m, max(tc.nodes, 1), tc.jobs, 0)
			w := tc.want
			w.Total = w.NUMA * w.Bandwidth * w.Interference * w.Comm
			if !near(got.NUMA, w.NUMA) || !near(got.Bandwidth, w.Bandwidth) || !near(got.Interference, w.Interference) ||
				!near(got.Comm, w.Comm) || !near(got.Total, w.Total) {
				t.Errorf("factors %+v, want %+v", got, w)
			}
		})
	}
}

// TestSlowdownWorstWorker: a job goes at the pace of its slowest worker.
func TestSlowdownWorstWorker(t *testing.T) {
	m := DefaultModel()
	jobs := []Running{
		{Profile: v1alpha1.ProfileMemory, Workers: []Placed{{Node: 0, Tasks: 1, Threads: 1, CPUs: []int{1, 0}}, {Node: 0, Tasks: 1, Threads: 1, CPUs: []int{0, 1}}}},
		{Profile: v1alpha1.ProfileMemory, Workers: []Placed{{Node: 0, Tasks: 16, Threads: 16, CPUs: []int{16, 0}}}},
	}
	got := factorsOf(m, 1, jobs, 0)
	if want := 0.1 + 0.9*0.125*17; !near(got.Bandwidth, want) {
		t.Errorf("bandwidth %v, want the saturated NUMA node's %v", got.Bandwidth, want)
	}
}

func TestNUMABalancingAndBackground(t *testing.T) {
	m := DefaultModel()
	m.NUMABalancing, m.BackgroundThreads = 1, 18
	jobs := []Running{{Profile: v1alpha1.ProfileCPU, Workers: []Placed{{Node: 0, Tasks: 18, Threads: 18}}}}
	got := factorsOf(m, 1, jobs, 0)
	if !near(got.NUMA, 1) || !near(got.Interference, 1.1) {
		t.Errorf("factors %+v: want no remote memory and a fully busy pool", got)
	}
	// Pinned workers leave the pool: 18 pinned, 18 floating background threads on 18 CPUs.
	jobs = append(jobs, Running{Profile: v1alpha1.ProfileCPU, Workers: []Placed{{Node: 0, Tasks: 18, Threads: 18, CPUs: []int{18, 0}}}})
	got = factorsOf(m, 1, jobs, 0)
	if !near(got.Interference, 2*1.1) {
		t.Errorf("interference %v, want 36 threads on an 18-CPU pool", got.Interference)
	}
}

func TestDecodeModel(t *testing.T) {
	m, err := DecodeModel([]byte("interNodePenalty: 1\nmemory: {memoryShare: 0.8}\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultModel()
	want.InterNodePenalty = 1
	want.Memory.MemoryShare = 0.8
	if m != want {
		t.Errorf("model %+v, want %+v (every field the file omits keeps its default)", m, want)
	}
	out, err := EncodeModel(DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	if back, err := DecodeModel(out, "printed"); err != nil || back != DefaultModel() {
		t.Errorf("printed model reads back as %+v, %v", back, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"interNodePenalty: -1", "interNodePenalty = -1: must be between 0 and 100"},
		{"cpu: {memoryShare: 0.7, commShare: 0.5}", "cpu: memoryShare + commShare = 1.2"},
		{"numaBalancing: 2", "numaBalancing = 2"},
		{"bogus: 1", `unknown field "bogus"`},
		{"cpu: {memoryshare: 0.2}", `unknown field "cpu.memoryshare"`},
		{"interNodePenalty: fast", "read model m.yaml"},
		{"[", "not valid YAML"},
	} {
		if _, err := DecodeModel([]byte(tc.in), "m.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to mention %q", tc.in, err, tc.want)
		}
	}
}
