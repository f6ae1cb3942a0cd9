package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// twoSockets is a machine of two sockets, each one NUMA node of cores cores with threads
// threads each.
func twoSockets(t testing.TB, cores, threads int) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: cores, ThreadsPerCore: threads})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// perNUMA counts cpus per NUMA node.
func perNUMA(topo *topology.Topology, cpus []int) []int {
	out := make([]int, len(topo.NUMANodes))
	for _, cpu := range cpus {
		out[topo.NUMANodeOfCPU(cpu)]++
	}
	return out
}

// TestTakePackedAcrossNUMANodes: on a two-socket machine without SMT (the paper's nodes), a
// request fills the fullest NUMA node first and spills over, but takes a wholly free NUMA node
// whole when it needs one — and a node with a reserved CPU is never wholly free.
func TestTakePackedAcrossNUMANodes(t *testing.T) {
	topo := twoSockets(t, 18, 1)
	m := New(topo)
	for _, tc := range []struct {
		name       string
		busy       []int // CPUs not free
		n          int
		took, left []int
	}{
		{"fits the fuller NUMA node", cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11).List(), 4, []int{4, 0}, []int{2, 18}},
		{"fills the fuller node, then spills", cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11).List(), 10, []int{6, 4}, []int{0, 14}},
		{"whole free NUMA node first", nil, 20, []int{18, 2}, []int{0, 16}},
		{"ties go to the lowest node", append(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7).List(), 18, 19, 20, 21, 22, 23, 24, 25), 3, []int{3, 0}, []int{7, 10}},
		{"skips full nodes", append(topo.CPUsOfNUMANode(0).List(), 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30), 5, []int{0, 5}, []int{0, 0}},
		{"a reserved CPU keeps its node from being whole", []int{0}, 18, []int{0, 18}, []int{17, 0}},
	} {
		free := m.Free(topo.OnlineCPUs.Difference(cpuset.New(tc.busy...)))
		cpus, ok := m.TakePacked(free, tc.n, topology.NoNUMA)
		left := perNUMA(topo, free.cpus())
		if !ok || !cmp.Equal(perNUMA(topo, cpus), tc.took) || !cmp.Equal(left, tc.left) {
			t.Errorf("%s: took %v (%v per NUMA node), leaving %v; want %v leaving %v", tc.name, cpus, perNUMA(topo, cpus), left, tc.took, tc.left)
		}
	}
}

// TestTakePackedInsideANode follows the documented order on a small SMT machine (2 nodes × 4
// cores × 2 threads, core i = CPUs {i, i+8}) under single-numa-node admission.
func TestTakePackedInsideANode(t *testing.T) {
	topo := twoSockets(t, 4, 2)
	m := New(topo)
	free := m.Free(topo.OnlineCPUs)
	for _, tc := range []struct {
		n    int
		node topology.NUMAID
		want []int
	}{
		{3, 0, []int{0, 8, 1}},      // a whole core, then one thread of the next core in order
		{1, 0, []int{9}},            // the partly used core fills before a free core is split
		{4, 0, []int{2, 10, 3, 11}}, // whole cores
		{2, 1, []int{4, 12}},        // node 0 is full: the next request goes to node 1
	} {
		node, ok := m.SingleNUMANode(free, tc.n)
		if !ok || node != tc.node {
			t.Fatalf("request of %d admitted on %d, %v; want node %d", tc.n, node, ok, tc.node)
		}
		if cpus, ok := m.TakePacked(free, tc.n, node); !ok || !cmp.Equal(cpus, tc.want) {
			t.Errorf("request of %d took %v, %v; want %v", tc.n, cpus, ok, tc.want)
		}
	}
	if _, ok := m.SingleNUMANode(free, 7); ok {
		t.Error("a request of 7 was admitted though no node has 7 free CPUs")
	}
	if cpus, ok := m.TakePacked(free, 20, topology.NoNUMA); ok || len(cpus) != 0 || free.Size() != 6 {
		t.Errorf("an impossible request took %v (%v), leaving %d free", cpus, ok, free.Size())
	}
}

func (f Free) cpus() []int {
	var out []int
	for cpu, ok := range f {
		if ok {
			out = append(out, cpu)
		}
	}
	return out
}

func BenchmarkTakePacked(b *testing.B) {
	topo := twoSockets(b, 16, 2)
	m := New(topo)
	free := m.Free(topo.OnlineCPUs)
	b.ReportAllocs()
	for b.Loop() {
		cpus, _ := m.TakePacked(free, 12, topology.NoNUMA)
		free.Release(cpus)
	}
}
