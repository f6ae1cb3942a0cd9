package report

import (
	"fmt"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// BenchmarkBuildAndConvert measures what the publisher does per change on a large node: build
// the object from a snapshot and convert it for the dynamic client. 2 sockets × 2 NUMA nodes ×
// 32 cores × 2 threads (256 CPUs) with 100 pinned containers.
func BenchmarkBuildAndConvert(b *testing.B) {
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 2, L3PerNUMA: 4, CoresPerL3: 8, ThreadsPerCore: 2, MemoryPerNUMA: 128 << 30})
	if err != nil {
		b.Fatal(err)
	}
	a, err := policy.New(topo, policy.Config{MinSharedCPUs: 2})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: fmt.Sprintf("uid-%03d", i), Container: "rank"}, CPUs: 2}); err != nil {
			b.Fatal(err)
		}
	}
	snap := SnapshotOf(a, 1, func(uid string) (string, string) { return "hpc", "worker-" + uid })
	node := NodeRef{Name: "node-a", UID: "uid-node"}
	b.ReportAllocs()
	for b.Loop() {
		obj, err := Build(node, topo, snap, Options{WholeCores: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := nrt.ToUnstructured(obj); err != nil {
			b.Fatal(err)
		}
	}
}
