package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// benchMachines run from 8 to 512 CPUs; all are SMT machines with L3 groups of 8 cores at most.
var benchMachines = []topology.Shape{
	{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2},
	{Sockets: 1, NUMAPerSocket: 2, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2},
	{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 2, CoresPerL3: 8, ThreadsPerCore: 2},
	{Sockets: 2, NUMAPerSocket: 2, L3PerNUMA: 2, CoresPerL3: 8, ThreadsPerCore: 2},
	{Sockets: 2, NUMAPerSocket: 4, L3PerNUMA: 2, CoresPerL3: 8, ThreadsPerCore: 2},
	{Sockets: 2, NUMAPerSocket: 4, L3PerNUMA: 4, CoresPerL3: 8, ThreadsPerCore: 2},
}

// halfFull returns an allocator whose machine is about half taken by requests of mixed sizes,
// and the size of request the benchmark makes on it.
func halfFull(b *testing.B, s topology.Shape) (*Allocator, int) {
	topo := synthetic(b, s)
	a := newAllocator(b, topo, "0", 1)
	rng := rand.New(rand.NewPCG(7, 7))
	perNode := topo.NumCPUs() / len(topo.NUMANodes)
	for i := 0; a.SharedCPUs().Size() > topo.NumCPUs()/2; i++ {
		r := Request{Key: key(fmt.Sprint("fill-", i)), CPUs: 2 * (1 + rng.IntN(perNode/4)), AllowSplitCores: i%5 == 0}
		if _, err := a.Allocate(r); err != nil && i > 10*topo.NumCPUs() {
			b.Fatalf("cannot half-fill the machine: %v", err)
		}
	}
	return a, min(8, max(2, perNode/4))
}

// BenchmarkAllocateRelease measures one exclusive allocation and its release on a half-full
// machine; the allocation alone costs at most this. The large case asks for a whole L3 group.
func BenchmarkAllocateRelease(b *testing.B) {
	for _, s := range benchMachines {
		a, n := halfFull(b, s)
		b.Run(fmt.Sprintf("cpus=%d", a.Topology().NumCPUs()), func(b *testing.B) {
			benchAllocate(b, a, n)
		})
	}
	a, _ := halfFull(b, benchMachines[len(benchMachines)-1])
	b.Run("cpus=512/large", func(b *testing.B) { benchAllocate(b, a, 16) })
}

func benchAllocate(b *testing.B, a *Allocator, n int) {
	r := Request{Key: key("bench"), CPUs: n}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Allocate(r); err != nil {
			b.Fatal(err)
		}
		a.Release(r.Key)
	}
}

// BenchmarkWouldFit measures the placer's and simulator's "would this fit" query.
func BenchmarkWouldFit(b *testing.B) {
	for _, s := range benchMachines {
		a, n := halfFull(b, s)
		b.Run(fmt.Sprintf("cpus=%d", a.Topology().NumCPUs()), func(b *testing.B) {
			r := Request{Key: key("bench"), CPUs: n}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.WouldFit(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSharedCPUs measures building the shared-pool set after a change.
func BenchmarkSharedCPUs(b *testing.B) {
	a, _ := halfFull(b, benchMachines[len(benchMachines)-1])
	b.ReportAllocs()
	for b.Loop() {
		a.sharedValid = false
		a.SharedCPUs()
	}
}
