package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// bruteForce plans like Plan but scores every node for every member, the paper's algorithm
// without the candidate pruning.
func bruteForce(s *snapshot.Snapshot, g *Gang) ([]string, bool) {
	p := newPlanner(s, g)
	order := make([]int, len(g.Members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return g.Members[a].Group - g.Members[b].Group })
	var out []string
	for _, i := range order {
		m := &g.Members[i]
		best := noCandidate
		for ni := range s.Nodes {
			n := &s.Nodes[ni]
			if staticReason(n, m.Constraints) != nil || exclusiveReason(n, g) != nil {
				continue
			}
			z, k := p.fit(int32(ni), m)
			if k != "" {
				continue
			}
			if c := (candidate{node: int32(ni), zone: z, score: p.score(p.use(int32(ni)), m.Group)}); p.better(c, best) {
				best = c
			}
		}
		if best.node < 0 {
			return out, false
		}
		pl := p.place(best, m, true)
		out = append(out, fmt.Sprintf("%s/%d", pl.Node, pl.NUMA))
	}
	return out, true
}

func TestPlanMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		in := randomCluster(rng, 2+rng.IntN(30))
		s := snapshot.Build(in)
		nw := 1 + rng.IntN(40)
		groups := 1 + rng.IntN(nw)
		tol := &Constraints{Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}}
		plain := &Constraints{}
		var ms []Member
		for i := range nw {
			c := plain
			if rng.IntN(3) == 0 {
				c = tol
			}
			p := st.Pod("hpc", fmt.Sprintf("w%d", i), "", fmt.Sprint(1+rng.IntN(6)), fmt.Sprintf("%dGi", rng.IntN(4)), rng.IntN(5) > 0)
			if rng.IntN(4) == 0 {
				withHostPort(p, 20000+int32(rng.IntN(3)))
			}
			ms = append(ms, MemberFromPod(p, AssignGroups(make([]int64, nw), groups)[i], c))
		}
		g := &Gang{Key: "HPCJob hpc/j", Members: ms, Groups: groups, Policy: Policy(rng.IntN(2)), ExclusiveNodes: rng.IntN(4) == 0, NoTaskGroups: rng.IntN(3) == 0}
		want, ok := bruteForce(s, g)
		res, err := Plan(s, g)
		if !ok {
			if err == nil {
				t.Fatalf("iteration %d: Plan placed a gang the brute force could not", iter)
			}
			continue
		}
		if err != nil {
			t.Fatalf("iteration %d: Plan failed where the brute force placed: %v", iter, err)
		}
		var got []string
		for _, p := range res.Placements {
			got = append(got, fmt.Sprintf("%s/%d", p.Node, p.NUMA))
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("iteration %d (%d members, %d groups, %s, task groups off %v): placements differ (-brute +plan):\n%s", iter, nw, groups, g.Policy, g.NoTaskGroups, d)
		}
	}
}

// withHostPort makes the pod use the host's network with an sshd on port.
func withHostPort(p *corev1.Pod, port int32) {
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "ssh", ContainerPort: port})
}

func randomCluster(rng *rand.Rand, n int) snapshot.Input {
	var in snapshot.Input
	for i := range n {
		name := fmt.Sprintf("n%03d", i)
		var taints []corev1.Taint
		if rng.IntN(6) == 0 {
			taints = append(taints, corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule})
		}
		zones := 1 + rng.IntN(4)
		per := 2 + rng.IntN(12)
		in.Nodes = append(in.Nodes, st.Node(name, zones*per, fmt.Sprintf("%dGi", 4+rng.IntN(60)), nil, taints...))
		if rng.IntN(8) == 0 {
			continue
		}
		var zs []st.Zone
		for z := range zones {
			free := rng.IntN(per + 1)
			list := ""
			if free > 0 {
				list = fmt.Sprintf("%d-%d", z*per, z*per+free-1)
			}
			zs = append(zs, st.Zone{Free: list, Available: -1, Memory: fmt.Sprintf("%dGi", 2+rng.IntN(16))})
		}
		in.Topologies = append(in.Topologies, st.NRT(name, 1, zs...))
		if rng.IntN(3) == 0 {
			p := st.Pod("web", "busy-"+name, name, fmt.Sprintf("%dm", rng.IntN(zones*per*1000)), "", false)
			if rng.IntN(3) == 0 {
				withHostPort(p, 20000+int32(rng.IntN(3)))
			}
			if rng.IntN(3) == 0 {
				p.Labels[v1alpha1.LabelPodGroup] = "other"
				p.Annotations[v1alpha1.AnnotationExclusiveNodes] = fmt.Sprint(rng.IntN(2) == 0)
			}
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}
