package snapshot_test

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// cluster is 5,000 nodes of two 32-CPU NUMA nodes and 50,000 pods, a tenth of them pinned and
// not yet reported.
func cluster() snapshot.Input {
	in := st.Uniform("n", 5000, 2, 32, 128)
	for i := range 50000 {
		node := fmt.Sprintf("n-%04d", i%5000)
		p := st.Pod("ns", fmt.Sprintf("p-%05d", i), node, "100m", "128Mi", false)
		if i%10 == 0 {
			p = st.Pod("ns", fmt.Sprintf("p-%05d", i), node, "2", "1Gi", true)
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

// BenchmarkBuild builds a snapshot of the cluster from its objects, what the placer did every
// time its snapshot expired before it kept a Cache.
func BenchmarkBuild(b *testing.B) {
	in := cluster()
	b.ReportAllocs()
	var s *snapshot.Snapshot
	for b.Loop() {
		s = snapshot.Build(in)
	}
	if len(s.Assumed()) != 5000 || len(s.Nodes) != 5000 {
		b.Fatalf("%d assumed, %d nodes", len(s.Assumed()), len(s.Nodes))
	}
}

// BenchmarkSnapshotUpdate is one placer cycle on the cluster: on `changed` nodes a pod's
// requests change and the node agent publishes a new free-core map, the cache takes the events,
// and the placer takes its snapshot — beside the full rebuild the cache replaces.
func BenchmarkSnapshotUpdate(b *testing.B) {
	in := cluster()
	b.Run("nodes=5000/pods=50000/rebuild", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snapshot.Build(in)
		}
	})
	for _, changed := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=5000/pods=50000/changed=%d", changed), func(b *testing.B) {
			c := snapshot.NewCache(v1alpha1.DefaultSchedulerName)
			c.Add(in)
			c.Snapshot()
			// Two versions of every changed node's first pod and map, taken in turn.
			var pods [2][]*corev1.Pod
			var maps [2][]*unstructured.Unstructured
			for v := range 2 {
				for i := range changed {
					p := in.Pods[i].DeepCopy()
					p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = st.Pod("", "", "", strconv.Itoa(100+v)+"m", "", false).Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
					pods[v] = append(pods[v], p)
					u := in.Topologies[i].DeepCopy()
					u.SetResourceVersion(strconv.Itoa(v + 1))
					maps[v] = append(maps[v], u)
				}
			}
			b.ReportAllocs()
			v := 0
			for b.Loop() {
				v = 1 - v
				for i := range changed {
					c.SetPod(pods[v][i])
					c.SetTopology(maps[v][i])
				}
				if s := c.Snapshot(); len(s.Nodes) != 5000 {
					b.Fatalf("%d nodes", len(s.Nodes))
				}
			}
		})
	}
}
