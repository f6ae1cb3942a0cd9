package policy

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// fixtures are the sysfs trees pkg/topology keeps: one captured from this project's development
// VM, the others generated from the documented layouts of real machines (its testdata/README.md).
var fixtures = []string{
	"epyc-7451-2s-smt",
	"vm-kvm-epyc-2cpu",
	"xeon-e2278g-offline-isolcpus",
	"xeon-e5-2697v4-2s",
	"xeon-gold-6248-2s-smt",
	"xeon-max-9480-2s-hbm-flat",
}

func fixture(t testing.TB, name string) *topology.Topology {
	t.Helper()
	topo, err := topology.Discover(filepath.Join("..", "topology", "testdata", name, "sys"))
	if err != nil {
		t.Fatalf("discover fixture %s: %v", name, err)
	}
	return topo
}

func TestFixturesRandomStreams(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			topo := fixture(t, name)
			a := newAllocator(t, topo, "0", 1)
			rng := rand.New(rand.NewPCG(3, uint64(topo.NumCPUs())))
			live := []Key{}
			for i := 0; i < 1000; i++ {
				if len(live) > 0 && rng.IntN(3) == 0 {
					j := rng.IntN(len(live))
					a.Release(live[j])
					live = append(live[:j], live[j+1:]...)
					continue
				}
				r := Request{Key: key(fmt.Sprint(i)), CPUs: 1 + rng.IntN(topo.NumCPUs()/2+1), AllowSplitCores: rng.IntN(2) == 0}
				if checkRequest(t, a, r) {
					live = append(live, r.Key)
				}
				if err := a.Verify(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
		})
	}
}

func TestFixtureXeonE5IsThePaperNode(t *testing.T) {
	a := newAllocator(t, fixture(t, "xeon-e5-2697v4-2s"), "", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 4, want: "0-3", mems: "0"},
		{name: "b", cpus: 8, numa: OnNUMANode(1), want: "18-25", mems: "1"},
	})
	if _, err := a.Allocate(req("c", 19)); !is[*TooLargeError](err) {
		t.Errorf("19 CPUs on 18-CPU NUMA nodes: error %v, want TooLargeError", err)
	}
}

func TestFixtureHBMNodesHaveNoCPUs(t *testing.T) {
	a := newAllocator(t, fixture(t, "xeon-max-9480-2s-hbm-flat"), "", 1)
	for _, node := range []int{2, 3} {
		_, err := a.Allocate(Request{Key: key("hbm"), CPUs: 4, NUMANode: OnNUMANode(topology.NUMAID(node))})
		if !is[*MemoryOnlyNUMANodeError](err) {
			t.Errorf("request on HBM node %d: error %v, want MemoryOnlyNUMANodeError", node, err)
		}
	}
	if free := a.Free(); len(free) != 4 || free[2].Capacity != 0 || free[0].Available != 56 {
		t.Errorf("free = %+v, want 4 nodes, HBM nodes without CPUs", free)
	}
}

func TestFixtureOfflineSiblings(t *testing.T) {
	// CPUs 14-15 are offline, so cores 6 and 7 keep one thread each (CPUs 6 and 7).
	topo := fixture(t, "xeon-e2278g-offline-isolcpus")
	a := newAllocator(t, topo, "", 1)
	runSteps(t, a, []step{{name: "whole", cpus: 12, want: "0-5,8-13"}})
	if _, err := a.Allocate(req("more", 2)); !is[*NoFitError](err) {
		t.Errorf("whole-core request with only lone threads left: error %v, want NoFitError", err)
	}
	runSteps(t, a, []step{{name: "thread", cpus: 1, split: true, want: "6"}})
}

func TestFixtureEPYCFillsL3GroupsInOrder(t *testing.T) {
	// EPYC 7451: 8 NUMA nodes of two 3-core CCXs; node 0 is CPUs 0-5,48-53, CCX 0 = cores 0-2.
	a := newAllocator(t, fixture(t, "epyc-7451-2s-smt"), "", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 4, want: "0-1,48-49", mems: "0"},
		{name: "b", cpus: 6, want: "3-5,51-53", mems: "0"}, // the empty CCX of the partly used node
		{name: "c", cpus: 2, want: "2,50", mems: "0"},      // best fit: the last core of CCX 0
		{name: "d", cpus: 8, want: "6-9,54-57", mems: "1"},
	})
}
