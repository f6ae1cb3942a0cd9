package cgroup

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

func mustParse(t testing.TB, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// treeSpec is "dir:parent:cur" entries in pre-order.
type treeSpec []struct {
	dir    string
	parent int
	cur    string
}

func (ts treeSpec) nodes(t testing.TB) []cpusetNode {
	out := make([]cpusetNode, len(ts))
	for i, n := range ts {
		out[i] = cpusetNode{dir: n.dir, parent: n.parent, cur: mustParse(t, n.cur)}
	}
	return out
}

func TestV1CpusetOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tree      treeSpec
		container int
		target    string
		want      []string
	}{
		{
			name:      "narrow a container: one write",
			tree:      treeSpec{{"kubepods", -1, "0-7"}, {"pod", 0, "0-7"}, {"ctr", 1, "0-7"}},
			container: 2, target: "2-3",
			want: []string{"ctr: 0-7 -> 2-3"},
		},
		{
			name:      "move a container outside its narrowed pod: widen the pod first",
			tree:      treeSpec{{"kubepods", -1, "0-7"}, {"burstable", 0, "0-3"}, {"pod", 1, "0-1"}, {"ctr", 2, "0-1"}},
			container: 3, target: "4-5",
			want: []string{"burstable: 0-3 -> 0-5", "pod: 0-1 -> 0-1,4-5", "ctr: 0-1 -> 4-5"},
		},
		{
			name:      "narrow a container with sub-cgroups: children first",
			tree:      treeSpec{{"pod", -1, "0-7"}, {"ctr", 0, "0-7"}, {"ctr/sub", 1, "0-7"}, {"ctr/sub/inner", 2, "2"}, {"ctr/other", 1, "5-7"}},
			container: 1, target: "2-3",
			want: []string{"ctr/sub: 0-7 -> 2-3", "ctr/other: 5-7 -> 2-3", "ctr: 0-7 -> 2-3"},
		},
		{
			name:      "move a container with a sub-cgroup to disjoint CPUs: widen down, narrow up",
			tree:      treeSpec{{"pod", -1, "0-7"}, {"ctr", 0, "0-1"}, {"ctr/sub", 1, "0-1"}},
			container: 1, target: "6-7",
			want: []string{"ctr: 0-1 -> 0-1,6-7", "ctr/sub: 0-1 -> 6-7", "ctr: 0-1,6-7 -> 6-7"},
		},
		{
			name:      "grow the shared pool: one write, sub-cgroup that mirrored follows",
			tree:      treeSpec{{"pod", -1, "0-7"}, {"ctr", 0, "0"}, {"ctr/sub", 1, "0"}},
			container: 1, target: "0-3",
			want: []string{"ctr: 0 -> 0-3", "ctr/sub: 0 -> 0-3"},
		},
		{
			name:      "already there: nothing",
			tree:      treeSpec{{"pod", -1, "0-7"}, {"ctr", 0, "2-3"}},
			container: 1, target: "2-3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.tree.nodes(t)
			v1CpusetWants(nodes, tc.container, mustParse(t, tc.target))
			var got []string
			for _, w := range orderV1CpusetWrites(nodes, fileCPUs) {
				got = append(got, fmt.Sprintf("%s: %s -> %s", w.Dir, w.Old, w.New))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// v1Sim models the kernel's v1 cpuset rules over a tree that also holds cgroups the planner
// does not know about (other containers of the pod).
type v1Sim struct {
	parent []int
	cur    []cpuset.CPUSet
	index  map[string]int
	all    cpuset.CPUSet
}

func (s *v1Sim) write(t *testing.T, w Write) {
	t.Helper()
	i := s.index[w.Dir]
	next := mustParse(t, w.New)
	if old := s.cur[i].String(); old != w.Old {
		t.Fatalf("write %v: planned from %s but the cgroup holds %s", w, w.Old, old)
	}
	parent := s.all
	if s.parent[i] >= 0 {
		parent = s.cur[s.parent[i]]
	}
	if next.IsEmpty() || !next.IsSubsetOf(parent) {
		t.Fatalf("write %v: EACCES, not a non-empty subset of the parent's %s", w, parent)
	}
	for c, p := range s.parent {
		if p == i && !s.cur[c].IsSubsetOf(next) {
			t.Fatalf("write %v: EBUSY, child %d holds %s", w, c, s.cur[c])
		}
	}
	s.cur[i] = next
}

func randomSubset(r *rand.Rand, of cpuset.CPUSet) cpuset.CPUSet {
	var keep []int
	for _, c := range of.List() {
		if r.IntN(2) == 0 {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		keep = append(keep, of.List()[r.IntN(of.Size())])
	}
	return cpuset.New(keep...)
}

// TestV1CpusetOrderRandom replays planned writes on random trees under the kernel's rules: no
// write may be refused, and the tree must end where the plan says.
func TestV1CpusetOrderRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for iter := 0; iter < 2000; iter++ {
		sim := &v1Sim{index: map[string]int{}, all: all}
		var nodes []cpusetNode
		add := func(parent int, planned bool) int {
			of := all
			if parent >= 0 {
				of = sim.cur[parent]
			}
			i := len(sim.cur)
			sim.parent = append(sim.parent, parent)
			sim.cur = append(sim.cur, randomSubset(r, of))
			dir := fmt.Sprintf("n%d", i)
			sim.index[dir] = i
			if planned {
				// Planned nodes are added before the others, so their indices agree.
				nodes = append(nodes, cpusetNode{dir: dir, parent: parent, cur: sim.cur[i]})
			}
			return i
		}
		// kubepods, QoS, pod, container, then the container's sub-cgroups in pre-order.
		chain := 3 + r.IntN(2)
		for i := 0; i < chain; i++ {
			add(i-1, true)
		}
		container := chain - 1
		var grow func(parent, depth int)
		grow = func(parent, depth int) {
			for k := r.IntN(3); k > 0 && depth < 3; k-- {
				grow(add(parent, true), depth+1)
			}
		}
		grow(container, 0)
		// Other containers of the pod, and a second pod, unknown to the planner.
		for k := r.IntN(3); k > 0; k-- {
			add(container-1, false)
		}
		add(container-2, false)
		target := randomSubset(r, all)
		before := append([]cpuset.CPUSet(nil), sim.cur...)
		v1CpusetWants(nodes, container, target)
		for _, w := range orderV1CpusetWrites(nodes, fileCPUs) {
			sim.write(t, w)
		}
		for i, n := range nodes {
			got := sim.cur[i]
			switch {
			case !got.Equals(n.want):
				t.Fatalf("iter %d: %s ends at %s, want %s", iter, n.dir, got, n.want)
			case i < container && !got.Equals(before[i].Union(target)):
				t.Fatalf("iter %d: ancestor %s ends at %s, want its old %s widened by %s", iter, n.dir, got, before[i], target)
			case i == container && !got.Equals(target):
				t.Fatalf("iter %d: container ends at %s, want %s", iter, got, target)
			case i > container && !got.IsSubsetOf(target):
				t.Fatalf("iter %d: sub-cgroup %s ends at %s, outside %s", iter, n.dir, got, target)
			}
		}
	}
}

func TestV1BandwidthOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want Quota
		first     string
	}{
		{"from unlimited: quota first", Quota{QuotaUnlimited, 100000}, Quota{20000, 50000}, fileQuota},
		{"to unlimited: period first", Quota{20000, 100000}, Quota{QuotaUnlimited, 50000}, filePeriod},
		{"growing share: period first", Quota{50000, 100000}, Quota{200000, 200000}, filePeriod},
		{"shrinking share: quota first", Quota{200000, 200000}, Quota{50000, 100000}, fileQuota},
	} {
		writes := []Write{{File: fileCPUs}, {File: filePeriod}, {File: fileQuota}, {File: fileShares}}
		orderV1Bandwidth(writes, tc.cur, tc.want)
		if writes[1].File != tc.first || writes[0].File != fileCPUs || writes[3].File != fileShares {
			t.Errorf("%s: order %v, want %s first among period and quota", tc.name, writes, tc.first)
		}
	}
}
