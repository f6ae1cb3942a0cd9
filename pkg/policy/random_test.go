package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// TestRandomStreamsKeepInvariants drives seeded random request/release streams through several
// machines and checks every answer against first principles: a grant is exactly the requested
// size, inside one NUMA node, whole cores unless splitting was allowed, and agrees with
// WouldFit; a refusal happens only when no single node could have held the request.
func TestRandomStreamsKeepInvariants(t *testing.T) {
	machines := map[string]struct {
		shape    topology.Shape
		reserved string
	}{
		"paper":     {paperNode, "0"},
		"dual-ht":   {dualSocketHT, "0,8"},
		"epyc-like": {epycLike, ""},
		"big":       {topology.Shape{Sockets: 2, NUMAPerSocket: 2, L3PerNUMA: 4, CoresPerL3: 8, ThreadsPerCore: 2}, "0-1,128-129"},
	}
	for name, m := range machines {
		t.Run(name, func(t *testing.T) {
			topo := synthetic(t, m.shape)
			a := newAllocator(t, topo, m.reserved, 2)
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			largest := topo.NumCPUs() / len(topo.NUMANodes)
			live := []Key{}
			for i := 0; i < 3000; i++ {
				if len(live) > 0 && rng.IntN(3) == 0 {
					j := rng.IntN(len(live))
					if _, ok := a.Release(live[j]); !ok {
						t.Fatalf("step %d: release of live %s failed", i, live[j])
					}
					live = append(live[:j], live[j+1:]...)
				} else {
					r := Request{Key: key(fmt.Sprint(i)), CPUs: 1 + rng.IntN(largest), AllowSplitCores: rng.IntN(2) == 0}
					if rng.IntN(4) == 0 {
						r.NUMANode = OnNUMANode(topology.NUMAID(rng.IntN(len(topo.NUMANodes))))
					}
					if checkRequest(t, a, r) {
						live = append(live, r.Key)
					}
				}
				if err := a.Verify(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
		})
	}
}

// checkRequest allocates r and checks the answer; it reports whether r was granted.
func checkRequest(t *testing.T, a *Allocator, r Request) bool {
	t.Helper()
	topo := a.Topology()
	free := a.Free()
	shared := a.SharedCPUs().Size()
	predicted, werr := a.WouldFit(r)
	asg, err := a.Allocate(r)
	if (werr == nil) != (err == nil) {
		t.Fatalf("%s: WouldFit error %v, Allocate error %v", r.Key, werr, err)
	}
	split := r.AllowSplitCores || topo.ThreadsPerCore() == 1
	if err != nil {
		var nofit *NoFitError
		var align *SMTAlignmentError
		var large *TooLargeError
		switch {
		case errors.As(err, &align):
			if split || r.CPUs%topo.ThreadsPerCore() == 0 {
				t.Fatalf("%s: unexpected %v", r.Key, err)
			}
		case errors.As(err, &nofit), errors.As(err, &large):
			for _, f := range free {
				want, required := r.NUMANode.Node()
				if required && f.NUMANode != want {
					continue
				}
				room := f.FreeWholeCores * topo.ThreadsPerCore()
				if split {
					room = f.FreeCPUs.Size()
				}
				if room >= r.CPUs && shared-r.CPUs >= a.MinSharedCPUs() {
					t.Fatalf("%s: refused %d CPUs (%v) though NUMA node %d has room %d", r.Key, r.CPUs, err, f.NUMANode, room)
				}
			}
		default:
			t.Fatalf("%s: unexpected error %v", r.Key, err)
		}
		return false
	}
	if asg.CPUs.Size() != r.CPUs {
		t.Fatalf("%s: got %d CPUs %s, asked for %d", r.Key, asg.CPUs.Size(), asg.CPUs, r.CPUs)
	}
	if asg.NUMANode != predicted || !asg.CPUs.IsSubsetOf(topo.CPUsOfNUMANode(asg.NUMANode)) || asg.Mems.String() != fmt.Sprint(asg.NUMANode) {
		t.Fatalf("%s: CPUs %s mems %s on node %d (WouldFit said %d)", r.Key, asg.CPUs, asg.Mems, asg.NUMANode, predicted)
	}
	if want, required := r.NUMANode.Node(); required && asg.NUMANode != want {
		t.Fatalf("%s: placed on node %d, required %d", r.Key, asg.NUMANode, want)
	}
	if !split {
		for _, cpu := range asg.CPUs.List() {
			if !topo.Siblings(cpu).IsSubsetOf(asg.CPUs) {
				t.Fatalf("%s: CPUs %s split the core of CPU %d", r.Key, asg.CPUs, cpu)
			}
		}
	}
	return true
}
