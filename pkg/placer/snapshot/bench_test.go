package snapshot_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// BenchmarkBuild builds a snapshot of 5,000 nodes and 50,000 pods (a tenth of them pinned and
// not yet reported), what the placer does every time its cached snapshot expires.
func BenchmarkBuild(b *testing.B) {
	in := st.Uniform("n", 5000, 2, 32, 128)
	for i := range 50000 {
		node := fmt.Sprintf("n-%04d", i%5000)
		p := st.Pod("ns", fmt.Sprintf("p-%05d", i), node, "100m", "128Mi", false)
		if i%10 == 0 {
			p = st.Pod("ns", fmt.Sprintf("p-%05d", i), node, "2", "1Gi", true)
		}
		in.Pods = append(in.Pods, p)
	}
	b.ReportAllocs()
	var s *snapshot.Snapshot
	for b.Loop() {
		s = snapshot.Build(in)
	}
	if len(s.Assumed) != 5000 || len(s.Nodes) != 5000 {
		b.Fatalf("%d assumed, %d nodes", len(s.Assumed), len(s.Nodes))
	}
	_ = corev1.PodRunning
}
