package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// benchCluster is n nodes of two 32-CPU NUMA nodes; with busy set, a random third of each
// node's CPUs is already taken by shared pods and pinned pods the maps account for.
func benchCluster(n int, busy bool) *snapshot.Snapshot {
	in := st.Uniform("n", n, 2, 32, 128)
	if busy {
		rng := rand.New(rand.NewPCG(7, 7))
		for i := range n {
			name := fmt.Sprintf("n-%04d", i)
			a, b := rng.IntN(33), rng.IntN(33)
			in.Topologies[i] = st.NRT(name, 1,
				st.Zone{Free: fmt.Sprintf("%d-31", a), Available: 32 - a, Memory: "128Gi"},
				st.Zone{Free: fmt.Sprintf("%d-63", 32+b), Available: 32 - b, Memory: "128Gi"})
			in.Pods = append(in.Pods, st.Pod("web", "shared-"+name, name, fmt.Sprintf("%dm", rng.IntN(8000)), "2Gi", false))
		}
	}
	return snapshot.Build(in)
}

func benchGang(workers, groups, cpus int) *Gang {
	c := &Constraints{Tolerations: []corev1.Toleration{{Key: "hpc", Operator: corev1.TolerationOpExists}}}
	g := &Gang{Key: "HPCJob hpc/bench", Groups: groups}
	grp := AssignGroups(make([]int64, workers), groups)
	for i := range workers {
		p := st.Pod("hpc", fmt.Sprintf("bench-worker-%d", i), "", fmt.Sprint(cpus), "1Gi", true)
		g.Members = append(g.Members, MemberFromPod(p, grp[i], c))
	}
	return g
}

// BenchmarkPlan plans a 1,000-worker gang over 5,000 nodes (target ≤ 50 ms per plan) and
// smaller and larger shapes around it.
func BenchmarkPlan(b *testing.B) {
	cases := []struct {
		name                   string
		nodes, workers, groups int
		cpus                   int
		busy                   bool
		policy                 Policy
	}{
		{"5000n/1000w/1000g/1cpu", 5000, 1000, 1000, 1, false, LeastLoaded},
		{"5000n/1000w/1000g/8cpu/busy", 5000, 1000, 1000, 8, true, LeastLoaded},
		{"5000n/1000w/250g/4cpu/busy", 5000, 1000, 250, 4, true, MostLoaded},
		{"5000n/1000w/1g/4cpu/busy", 5000, 1000, 1, 4, true, LeastLoaded},
		{"5000n/1000w/1g/24cpu/busy", 5000, 1000, 1, 24, true, MostLoaded},
		{"100n/100w/10g/4cpu", 100, 100, 10, 4, false, LeastLoaded},
		{"10000n/2000w/2000g/8cpu/busy", 10000, 2000, 2000, 8, true, LeastLoaded},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := benchCluster(tc.nodes, tc.busy)
			g := benchGang(tc.workers, tc.groups, tc.cpus)
			g.Policy = tc.policy
			if _, err := Plan(s, g); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Plan(s, g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanUnfit measures a gang that does not fit (the diagnosis included).
func BenchmarkPlanUnfit(b *testing.B) {
	s := benchCluster(5000, true)
	g := benchGang(1000, 1000, 33)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(s, g); err == nil {
			b.Fatal("33-CPU workers fit 32-CPU NUMA nodes")
		}
	}
}
