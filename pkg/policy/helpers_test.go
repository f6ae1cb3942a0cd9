package policy

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Named test machines, written as shapes a reader can picture with lscpu.
var (
	// paperNode is the paper's two-socket Xeon E5-2697 v4 node without SMT: 2 × 18 cores.
	paperNode = topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 18, ThreadsPerCore: 1, MemoryPerNUMA: 64 << 30}
	// dualSocketHT is a small two-socket SMT machine: 2 × 4 cores × 2 threads, core i = {i, i+8}.
	dualSocketHT = topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 8 << 30}
	// twoNodesNoSMT is one socket split into two NUMA nodes of 8 cores, no SMT.
	twoNodesNoSMT = topology.Shape{Sockets: 1, NUMAPerSocket: 2, L3PerNUMA: 1, CoresPerL3: 8, ThreadsPerCore: 1, MemoryPerNUMA: 8 << 30}
	// epycLike has two NUMA nodes with two L3 groups (CCXs) of 4 SMT cores each: 32 CPUs, core i
	// = {i, i+16}; node 0 holds cores 0-7 (L3 groups 0-3 and 4-7).
	epycLike = topology.Shape{Sockets: 1, NUMAPerSocket: 2, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 16 << 30}
)

func synthetic(t testing.TB, s topology.Shape) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(s)
	if err != nil {
		t.Fatalf("synthetic topology %+v: %v", s, err)
	}
	return topo
}

func newAllocator(t testing.TB, topo *topology.Topology, reserved string, minShared int) *Allocator {
	t.Helper()
	a, err := New(topo, Config{ReservedCPUs: mustParse(t, reserved), MinSharedCPUs: minShared})
	if err != nil {
		t.Fatalf("new allocator: %v", err)
	}
	return a
}

func mustParse(t testing.TB, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return set
}

func key(name string) Key { return Key{PodUID: "uid-" + name, Container: name} }

func req(name string, cpus int) Request { return Request{Key: key(name), CPUs: cpus} }

func mustAllocate(t *testing.T, a *Allocator, r Request) Assignment {
	t.Helper()
	asg, err := a.Allocate(r)
	if err != nil {
		t.Fatalf("allocate %d CPUs for %s: %v", r.CPUs, r.Key, err)
	}
	if err := a.Verify(); err != nil {
		t.Fatalf("after allocating for %s: %v", r.Key, err)
	}
	return asg
}

// memoryOnlyAndDegraded is a literal machine: NUMA node 0 has 4 SMT cores, one of which (core 3)
// lost its sibling CPU 7 to offlining; node 1 is memory only (CXL).
func memoryOnlyAndDegraded(t testing.TB) *topology.Topology {
	t.Helper()
	spec := topology.Spec{
		NUMANodes: []topology.NUMANodeSpec{
			{ID: 0, MemoryBytes: 8 << 30, Distances: []int{10, 20}},
			{ID: 1, MemoryBytes: 64 << 30, Distances: []int{20, 10}},
		},
		Offline: cpuset.New(7),
	}
	for cpu := 0; cpu < 7; cpu++ {
		spec.CPUs = append(spec.CPUs, topology.CPUSpec{ID: cpu, KernelCoreID: cpu % 4, NUMANode: 0, L3: 0})
	}
	topo, err := topology.New(spec)
	if err != nil {
		t.Fatalf("literal topology: %v", err)
	}
	return topo
}
