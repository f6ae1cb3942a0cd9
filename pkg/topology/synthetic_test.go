package topology

import "testing"

func TestSyntheticDualSocketSMT(t *testing.T) {
	topo, err := Synthetic(Shape{Sockets: 2, NUMAPerSocket: 2, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topo.OnlineCPUs.String(), "0-63"; got != want {
		t.Errorf("online = %s, want %s", got, want)
	}
	if got, want := len(topo.Cores), 32; got != want {
		t.Errorf("cores = %d, want %d", got, want)
	}
	if got, want := topo.Siblings(33).String(), "1,33"; got != want {
		t.Errorf("siblings(33) = %s, want %s", got, want)
	}
	if got, want := topo.CPUsOfNUMANode(1).String(), "8-15,40-47"; got != want {
		t.Errorf("node 1 CPUs = %s, want %s", got, want)
	}
	if got, want := topo.Distance(0, 1), 12; got != want {
		t.Errorf("distance(0,1) = %d, want %d", got, want)
	}
	if got, want := topo.Distance(0, 2), 21; got != want {
		t.Errorf("distance(0,2) = %d, want %d", got, want)
	}
	if got, want := topo.L3Groups[3].CPUs.String(), "12-15,44-47"; got != want {
		t.Errorf("L3 group 3 = %s, want %s", got, want)
	}
	if got, want := topo.ThreadsPerCore(), 2; got != want {
		t.Errorf("threads per core = %d, want %d", got, want)
	}
	if got := topo.NUMANodes[2].L3Groups; len(got) != 2 || got[0] != 4 {
		t.Errorf("node 2 L3 groups = %v, want [4 5]", got)
	}
	if got, want := topo.Sockets[1].NUMANodes, []NUMAID{2, 3}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("socket 1 NUMA nodes = %v, want %v", got, want)
	}
}
