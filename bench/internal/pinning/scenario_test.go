package pinning

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

func synthetic(t *testing.T, s topology.Shape) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(s)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// summary spells a layout in kernel list syntax for comparison.
type summary struct {
	Noise  bool
	Groups []string // "cpus:ranks"
	Mems   string
	Shared string
}

func summarise(l layout) summary {
	s := summary{Noise: l.noise, Mems: l.mems.String(), Shared: l.shared.String()}
	for _, g := range l.groups {
		ranks := make([]int, len(g.ranks))
		copy(ranks, g.ranks)
		s.Groups = append(s.Groups, g.cpus.String()+":"+cpuset.New(ranks...).String())
	}
	return s
}

func TestPlanTwoCPUs(t *testing.T) {
	// This machine's shape: one socket, one NUMA node, one L3, two cores without SMT.
	topo := synthetic(t, topology.Shape{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	for name, want := range map[string]summary{
		Alone:         {},
		Unmanaged:     {Noise: true},
		Exclusive:     {Noise: true, Groups: []string{"0:0"}, Mems: "0", Shared: "1"},
		Fine:          {Noise: true, Groups: []string{"0:0"}, Mems: "0", Shared: "1"},
		Coarse:        {Noise: true, Groups: []string{"0:0"}, Mems: "0", Shared: "1"},
		KubeletStatic: {Noise: true, Groups: []string{"1:0"}, Shared: "0"},
	} {
		l, err := plan(name, topo, 1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(want, summarise(l)); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

func TestPlanTwoSocketsSMT(t *testing.T) {
	// 2 sockets × 1 NUMA node × 2 L3 groups × 4 cores × 2 threads: core i holds CPUs i, i+16.
	topo := synthetic(t, topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2})
	coarse, err := plan(Coarse, topo, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(coarse.groups) != 1 || coarse.groups[0].cpus.Size() != 6 || len(coarse.groups[0].ranks) != 3 {
		t.Fatalf("coarse: %+v, want one cgroup of 3 whole cores for 3 ranks", summarise(coarse))
	}
	fine, err := plan(Fine, topo, 3)
	if err != nil {
		t.Fatal(err)
	}
	all := cpuset.New()
	for _, g := range fine.groups {
		if g.cpus.Size() != 2 || len(g.ranks) != 1 {
			t.Errorf("fine group %s for ranks %v: want a whole core (2 threads) per rank", g.cpus, g.ranks)
		}
		all = all.Union(g.cpus)
	}
	for _, l := range []layout{coarse, fine} {
		cpus := l.ranksCPUs()
		if l.mems.Size() != 1 || !cpus.IsSubsetOf(topo.CPUsOfNUMANode(topology.NUMAID(l.mems.List()[0]))) {
			t.Errorf("ranks on %s with mems %s: want one NUMA node for CPUs and memory", cpus, l.mems)
		}
		if !l.shared.Equals(topo.OnlineCPUs.Difference(cpus)) {
			t.Errorf("shared pool %s, want every CPU the ranks do not hold", l.shared)
		}
	}
	ks, err := plan(KubeletStatic, topo, 3)
	if err != nil {
		t.Fatal(err)
	}
	// CPU 0 is reserved; then core order packs siblings: core 0's other thread, then core 1.
	if d := cmp.Diff([]string{"16:0", "1:1", "17:2"}, summarise(ks).Groups); d != "" {
		t.Errorf("kubelet-static groups (-want +got):\n%s", d)
	}
	if !ks.mems.IsEmpty() {
		t.Errorf("kubelet-static set mems %s, want them left at every node", ks.mems)
	}
}

func TestPlanErrors(t *testing.T) {
	topo := synthetic(t, topology.Shape{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 2, ThreadsPerCore: 1})
	for _, tc := range []struct {
		scenario string
		ranks    int
		want     string
	}{
		{"gang", 1, `unknown scenario "gang"`},
		{Exclusive, 2, "allocate 1 CPUs for ranks [1]"},
		{Coarse, 2, "allocate 2 CPUs for ranks [0 1]"},
		{KubeletStatic, 2, "2 ranks need 2 CPUs besides the reserved one"},
	} {
		_, err := plan(tc.scenario, topo, tc.ranks)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %d ranks: got %v, want an error containing %q", tc.scenario, tc.ranks, err, tc.want)
		}
	}
}

func TestDefaultRanks(t *testing.T) {
	for _, tc := range []struct {
		shape topology.Shape
		want  int
	}{
		{topology.Shape{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 2, ThreadsPerCore: 1}, 1},
		{topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2}, 7},
		{topology.Shape{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 1, ThreadsPerCore: 1}, 1},
	} {
		if got := DefaultRanks(synthetic(t, tc.shape)); got != tc.want {
			t.Errorf("%+v: %d ranks, want %d", tc.shape, got, tc.want)
		}
	}
}
