package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// paperCluster is four nodes like the paper's testbed: two NUMA nodes of 18 CPUs, 64Gi each.
func paperCluster() *snapshot.Snapshot {
	return snapshot.Build(st.Uniform("n", 4, 2, 18, 64))
}

// workers makes n pinned members of cpus CPUs each, in groups dealt round-robin.
func workers(n, groups, cpus int) []Member {
	c := &Constraints{}
	var ms []Member
	for i := range n {
		p := st.Pod("hpc", fmt.Sprintf("j-worker-%d", i), "", fmt.Sprint(cpus), "1Gi", true)
		ms = append(ms, MemberFromPod(p, i%groups, c))
	}
	return ms
}

func nodesOf(res *Result) []string {
	var out []string
	for _, p := range res.Placements {
		out = append(out, fmt.Sprintf("%s/%d", p.Node, p.NUMA))
	}
	return out
}

func TestAssignGroups(t *testing.T) {
	tests := []struct {
		req    []int64
		groups int
		want   []int
	}{
		{[]int64{1, 1, 1, 1, 1, 1, 1, 1}, 4, []int{0, 1, 2, 3, 0, 1, 2, 3}},
		{[]int64{6, 5, 5}, 2, []int{0, 1, 1}},
		{[]int64{3, 3, 3, 3, 2, 2, 2, 2, 2, 2}, 3, []int{0, 1, 2, 0, 1, 2, 1, 2, 0, 1}},
		{[]int64{5}, 1, []int{0}},
	}
	for _, tc := range tests {
		if got := AssignGroups(tc.req, tc.groups); !slices.Equal(got, tc.want) {
			t.Errorf("AssignGroups(%v, %d) = %v, want %v", tc.req, tc.groups, got, tc.want)
		}
	}
}

// Members of one group share a node; different groups avoid each other's nodes.
func TestPlanKeepsGroupsTogether(t *testing.T) {
	g := &Gang{Key: "HPCJob hpc/j", Members: workers(16, 4, 1), Groups: 4}
	res, err := Plan(paperCluster(), g)
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[int]map[string]bool{}
	for _, p := range res.Placements {
		grp := g.Members[p.Member].Group
		if byGroup[grp] == nil {
			byGroup[grp] = map[string]bool{}
		}
		byGroup[grp][p.Node] = true
	}
	seen := map[string]bool{}
	for grp, nodes := range byGroup {
		if len(nodes) != 1 {
			t.Errorf("group %d spans nodes %v", grp, nodes)
		}
		for n := range nodes {
			if seen[n] {
				t.Errorf("node %s holds two groups", n)
			}
			seen[n] = true
		}
	}
	if res.NodesUsed != 4 {
		t.Errorf("nodes used = %d, want 4", res.NodesUsed)
	}
}

// With task groups off every node scores alike, so the policy alone places each member: least
// loaded spreads one group that task groups would pack, most loaded packs groups that task
// groups would keep apart.
func TestPlanTaskGroupsOff(t *testing.T) {
	tests := []struct {
		name          string
		groups        int
		policy        Policy
		on, off       int
		offFirstNodes []string
	}{
		{"one group, least loaded", 1, LeastLoaded, 1, 4, []string{"n-0000/0", "n-0001/0", "n-0002/0", "n-0003/0"}},
		{"four groups, most loaded", 4, MostLoaded, 4, 1, []string{"n-0000/0", "n-0000/0", "n-0000/0", "n-0000/0"}},
	}
	for _, tc := range tests {
		for _, off := range []bool{false, true} {
			g := &Gang{Key: "HPCJob hpc/j", Members: workers(8, tc.groups, 4), Groups: tc.groups, Policy: tc.policy, NoTaskGroups: off}
			res, err := Plan(paperCluster(), g)
			if err != nil {
				t.Fatalf("%s, task groups off %v: %v", tc.name, off, err)
			}
			want := tc.on
			if off {
				want = tc.off
				if got := nodesOf(res)[:4]; !slices.Equal(got, tc.offFirstNodes) {
					t.Errorf("%s, task groups off: first placements %v, want %v", tc.name, got, tc.offFirstNodes)
				}
			}
			if res.NodesUsed != want {
				t.Errorf("%s, task groups off %v: %d nodes used, want %d (%v)", tc.name, off, res.NodesUsed, want, nodesOf(res))
			}
		}
	}
}

// With task groups off, a node holding the member's group, one holding other groups and an
// untouched node all score the same.
func TestScoreTaskGroupsOffAlike(t *testing.T) {
	for _, off := range []bool{false, true} {
		g := &Gang{Key: "HPCJob hpc/j", Members: workers(6, 3, 1), Groups: 3, NoTaskGroups: off}
		p := newPlanner(paperCluster(), g)
		p.addMember(0, 0)
		p.addMember(0, 0)
		p.addMember(1, 1)
		scores := []int{p.score(p.use(0), 0), p.score(p.use(1), 0), p.score(p.use(2), 0)}
		alike := scores[0] == scores[1] && scores[1] == scores[2]
		if alike != off {
			t.Errorf("task groups off %v: scores of same-group, other-group and untouched nodes %v; alike %v, want %v", off, scores, alike, off)
		}
	}
}

func TestPlanPolicies(t *testing.T) {
	in := st.Uniform("n", 3, 1, 16, 64)
	in.Pods = []*corev1.Pod{st.Pod("web", "a", "n-0000", "4", "", false), st.Pod("web", "b", "n-0002", "8", "", false)}
	s := snapshot.Build(in)
	for policy, want := range map[Policy]string{LeastLoaded: "n-0001/0", MostLoaded: "n-0002/0"} {
		res, err := Plan(s, &Gang{Key: "HPCJob hpc/j", Members: workers(1, 1, 2), Groups: 1, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		if got := nodesOf(res); !slices.Equal(got, []string{want}) {
			t.Errorf("%s placed on %v, want %s", policy, got, want)
		}
	}
}

// A pinned member goes to the fullest NUMA node that fits it.
func TestPlanPicksBestFitNUMANode(t *testing.T) {
	in := snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 36, "128Gi", nil)}, Topologies: []*unstructured.Unstructured{
		st.NRT("n1", 1, st.Zone{Free: "0-17", Available: -1}, st.Zone{Free: "30-35", Available: -1})}}
	res, err := Plan(snapshot.Build(in), &Gang{Key: "k", Members: workers(3, 1, 4), Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nodesOf(res), []string{"n1/1", "n1/0", "n1/0"}; !slices.Equal(got, want) {
		t.Errorf("placements %v, want %v", got, want)
	}
}

// TestPlanKeepsTheSharedPoolMinimum: each NUMA node of a 2 × 4-CPU node with nothing reserved
// offers its 4 CPUs, but the agent keeps one CPU shared across both and publishes 7 for the
// node: two 4-CPU workers never go there together (the agent would refuse the second).
func TestPlanKeepsTheSharedPoolMinimum(t *testing.T) {
	two := snapshot.Build(st.Uniform("n", 2, 2, 4, 64))
	res, err := Plan(two, &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 4), Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res); !slices.Equal(got, []string{"n-0000/0", "n-0001/0"}) {
		t.Errorf("placements %v, want one worker per node", got)
	}
	one := snapshot.Build(st.Uniform("n", 1, 2, 4, 64))
	_, err = Plan(one, &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 4), Groups: 1})
	if err == nil || !strings.Contains(err.Error(), "have no NUMA node with 4 free CPUs and 1Gi free memory (the largest has 3)") {
		t.Errorf("two 4-CPU workers on one 2 × 4-CPU node: %v", err)
	}
	if got := LargestZone(one); got != 4 {
		t.Errorf("LargestZone = %d, want 4", got)
	}
	if _, err := Plan(one, &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 3), Groups: 1}); err != nil {
		t.Errorf("two 3-CPU workers on one 2 × 4-CPU node: %v", err)
	}
}

func TestPlanMinAvailable(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 1, 9, 64))
	g := &Gang{Key: "HPCJob hpc/j", Members: workers(3, 3, 8), Groups: 3}
	if _, err := Plan(s, g); err == nil {
		t.Fatal("three 8-CPU workers fit two 9-CPU nodes")
	}
	g.MinAvailable = 2
	res, err := Plan(s, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placements) != 2 || !slices.Equal(res.Unplaced, []int{2}) {
		t.Errorf("placements %v unplaced %v, want two placed and member 2 not", nodesOf(res), res.Unplaced)
	}
}

func TestPlanExclusiveNodes(t *testing.T) {
	in := st.Uniform("n", 3, 1, 17, 64)
	other := st.Pod("hpc", "k-worker-0", "n-0000", "2", "", true)
	other.Labels[v1alpha1.LabelJob], other.Labels[v1alpha1.LabelRole] = "k", v1alpha1.RoleWorker
	excl := st.Pod("ml", "p", "n-0001", "2", "", true)
	excl.Labels[v1alpha1.LabelPodGroup] = "train"
	excl.Annotations[v1alpha1.AnnotationExclusiveNodes] = "true"
	excl.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	// k's worker is one the placer placed and still assumes; the pod group's names the placer.
	in.Own, in.Pods, in.SchedulerName = []*corev1.Pod{other}, []*corev1.Pod{excl}, v1alpha1.DefaultSchedulerName
	s := snapshot.Build(in)

	// Not exclusive itself: may share n-0000 with a plain job, never n-0001 with an exclusive one.
	res, err := Plan(s, &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 8), Groups: 1, Policy: MostLoaded})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Placements {
		if p.Node == "n-0001" {
			t.Errorf("placed on %s, held by an exclusive job", p.Node)
		}
	}
	// Exclusive: only the empty node.
	res, err = Plan(s, &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 8), Groups: 1, ExclusiveNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res); !slices.Equal(got, []string{"n-0002/0", "n-0002/0"}) {
		t.Errorf("exclusive job placed on %v, want n-0002 only", got)
	}
	_, err = Plan(s, &Gang{Key: "HPCJob hpc/j", Members: workers(3, 1, 8), Groups: 1, ExclusiveNodes: true})
	if err == nil || !strings.Contains(err.Error(), "1 run HPCJob hpc/k (exclusive nodes), 1 run pod group ml/train (exclusive nodes)") {
		t.Errorf("error %v does not name the jobs holding the nodes", err)
	}
}

func TestPlanLauncher(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 1, 9, 64))
	launch := MemberFromPod(st.Pod("hpc", "j-launcher", "", "500m", "", false), 0, &Constraints{})
	g := &Gang{Key: "HPCJob hpc/j", Members: workers(1, 1, 4), Groups: 1, Launcher: &launch}
	res, err := Plan(s, g)
	if err != nil {
		t.Fatal(err)
	}
	if res.Launcher == nil || res.Launcher.Node != res.Placements[0].Node || res.Launcher.NUMA != -1 {
		t.Errorf("launcher %+v, want shared on the worker's node %s", res.Launcher, res.Placements[0].Node)
	}
	// Both workers take 8 of one node's 9 CPUs; a launcher too big for what is left goes to the
	// other node.
	big := MemberFromPod(st.Pod("hpc", "j-launcher", "", "6", "", false), 0, &Constraints{})
	g = &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 4), Groups: 1, Launcher: &big}
	res, err = Plan(s, g)
	if err != nil {
		t.Fatal(err)
	}
	if res.Launcher.Node == res.Placements[0].Node {
		t.Errorf("6-CPU launcher on the full node %s", res.Launcher.Node)
	}
	huge := MemberFromPod(st.Pod("hpc", "j-launcher", "", "10", "", false), 0, &Constraints{})
	g.Launcher = &huge
	_, err = Plan(s, g)
	var fe *FitError
	if !asFitError(err, &fe) || !fe.Launcher || !strings.Contains(err.Error(), "launcher j-launcher") {
		t.Errorf("error %v, want a launcher FitError", err)
	}
}

func asFitError(err error, fe **FitError) bool {
	e, ok := err.(*FitError)
	*fe = e
	return ok
}

// Bound members stay and attract their group.
func TestPlanBoundMembers(t *testing.T) {
	in := st.Uniform("n", 3, 1, 16, 64)
	bound := st.Pod("hpc", "j-worker-0", "n-0002", "2", "1Gi", true)
	in.Pods = []*corev1.Pod{bound}
	s := snapshot.Build(in)
	ms := workers(3, 1, 2)
	ms[0].BoundNode = "n-0002"
	res, err := Plan(s, &Gang{Key: "HPCJob hpc/j", Members: ms, Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res); !slices.Equal(got, []string{"n-0002/0", "n-0002/0"}) {
		t.Errorf("placements %v, want both beside the bound worker on n-0002", got)
	}
}

func TestPlanRejectsMalformedGangs(t *testing.T) {
	s := paperCluster()
	ms := workers(2, 1, 1)
	for _, tc := range []struct {
		g    Gang
		want string
	}{
		{Gang{Key: "k", Members: ms, Groups: 0}, "0 groups"},
		{Gang{Key: "k", Members: ms, Groups: 1, MinAvailable: 3}, "minAvailable 3 outside 0..2"},
		{Gang{Key: "k", Members: []Member{{Name: "x", Group: 2, Constraints: &Constraints{}}}, Groups: 1}, "member x has group 2"},
		{Gang{Key: "k", Members: []Member{{Name: "x"}}, Groups: 1}, "member x has no constraints"},
	} {
		if _, err := Plan(s, &tc.g); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestFilters(t *testing.T) {
	node := &snapshot.Node{Name: "n1", Labels: map[string]string{"zone": "a", "cores": "36"}, Taints: []corev1.Taint{
		{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
	}}
	tolGPU := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true"}}
	term := func(reqs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}
	}
	req := func(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
	}
	tests := []struct {
		name string
		c    Constraints
		want Kind
	}{
		{"untolerated", Constraints{}, KindTaint},
		{"tolerated", Constraints{Tolerations: tolGPU}, ""},
		{"tolerate all", Constraints{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, ""},
		{"wrong value", Constraints{Tolerations: []corev1.Toleration{{Key: "gpu", Value: "false"}}}, KindTaint},
		{"selector match", Constraints{Tolerations: tolGPU, NodeSelector: map[string]string{"zone": "a"}}, ""},
		{"selector miss", Constraints{Tolerations: tolGPU, NodeSelector: map[string]string{"zone": "b"}}, KindSelector},
		{"in", Constraints{Tolerations: tolGPU, Required: term(req("zone", corev1.NodeSelectorOpIn, "a", "b"))}, ""},
		{"not in", Constraints{Tolerations: tolGPU, Required: term(req("zone", corev1.NodeSelectorOpNotIn, "a"))}, KindSelector},
		{"exists", Constraints{Tolerations: tolGPU, Required: term(req("zone", corev1.NodeSelectorOpExists))}, ""},
		{"does not exist", Constraints{Tolerations: tolGPU, Required: term(req("rack", corev1.NodeSelectorOpDoesNotExist))}, ""},
		{"gt", Constraints{Tolerations: tolGPU, Required: term(req("cores", corev1.NodeSelectorOpGt, "32"))}, ""},
		{"lt", Constraints{Tolerations: tolGPU, Required: term(req("cores", corev1.NodeSelectorOpLt, "32"))}, KindSelector},
		{"and", Constraints{Tolerations: tolGPU, Required: term(req("zone", corev1.NodeSelectorOpIn, "a"), req("cores", corev1.NodeSelectorOpIn, "8"))}, KindSelector},
		{"or", Constraints{Tolerations: tolGPU, Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "b")}},
			{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")}},
		}}}, ""},
		{"empty term", Constraints{Tolerations: tolGPU, Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}, KindSelector},
	}
	for _, tc := range tests {
		var got Kind
		if r := staticReason(node, &tc.c); r != nil {
			got = r.kind
		}
		if got != tc.want {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFitErrorExplains(t *testing.T) {
	in := st.Uniform("n", 4, 2, 6, 64)
	in.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	in.Topologies = in.Topologies[:3]
	_, err := Plan(snapshot.Build(in), &Gang{Key: "HPCJob hpc/j", Members: workers(2, 1, 8), Groups: 1})
	want := "HPCJob hpc/j: member j-worker-0 (8 exclusive CPUs in one NUMA node, requests cpu 8, memory 1Gi) fits none of 4 nodes: " +
		"2 have no NUMA node with 8 free CPUs and 1Gi free memory (the largest has 6), " +
		"1 cannot take pinned workers: no NodeResourceTopology: the node agent has not published a free-core map, " +
		"1 untolerated taint gpu=true:NoSchedule; all 2 members must fit together; " +
		"a worker needs all its CPUs in one NUMA node: use more, smaller workers (granularity: granularity) or wait for cores to free up"
	if err == nil || err.Error() != want {
		t.Errorf("error\n%v\nwant\n%s", err, want)
	}
	if fe := err.(*FitError); fe.Kind() != KindNUMA {
		t.Errorf("kind %s, want numa", fe.Kind())
	}
	_, err = Plan(snapshot.Build(snapshot.Input{}), &Gang{Key: "k", Members: workers(1, 1, 1), Groups: 1})
	if err == nil || !strings.Contains(err.Error(), "fits none of 0 nodes; all 1 members must fit together; the cluster has no nodes") {
		t.Errorf("empty cluster: %v", err)
	}
}

func TestPodGang(t *testing.T) {
	mk := func(name, min, node string) *corev1.Pod {
		p := st.Pod("ml", name, node, "2", "1Gi", true)
		p.Labels[v1alpha1.LabelPodGroup] = "train"
		if min != "" {
			p.Labels[v1alpha1.LabelPodGroupMinAvailable] = min
		}
		return p
	}
	done := mk("p9", "2", "n-0000")
	done.Status.Phase = corev1.PodFailed
	g, err := PodGang("ml", "train", []*corev1.Pod{mk("p1", "2", ""), mk("p0", "2", "n-0001"), mk("p2", "2", ""), done})
	if err != nil {
		t.Fatal(err)
	}
	if g.Key != "pod group ml/train" || g.MinAvailable != 2 || len(g.Members) != 3 || g.Members[0].BoundNode != "n-0001" ||
		g.Members[0].Constraints != g.Members[1].Constraints {
		t.Errorf("gang = %+v", g)
	}
	res, err := Plan(snapshot.Build(st.Uniform("n", 2, 1, 8, 64)), g)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res); !slices.Equal(got, []string{"n-0001/0", "n-0001/0"}) {
		t.Errorf("pod group placed on %v, want beside its bound pod on n-0001", got)
	}
	for _, tc := range []struct {
		pods []*corev1.Pod
		want string
	}{
		{[]*corev1.Pod{mk("a", "x", "")}, `pod a has label pod-group.scheduling.x-k8s.io/min-available="x", want a positive integer`},
		{[]*corev1.Pod{mk("a", "1", ""), mk("b", "2", "")}, "pods a and b disagree on pod-group.scheduling.x-k8s.io/min-available (1 and 2)"},
		{[]*corev1.Pod{mk("a", "3", "")}, "has 1 pods, fewer than its min-available 3: waiting"},
	} {
		if _, err := PodGang("ml", "train", tc.pods); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// A plain pod gang takes its tie-break from finegrain.dev/placement on its pods (as the Slurm
// delegation bridge writes it): most-loaded on any pod makes the gang most-loaded; absent or
// anything else, least-loaded.
func TestPodGangPlacement(t *testing.T) {
	mk := func(name, placement string) *corev1.Pod {
		p := st.Pod("ml", name, "", "2", "1Gi", true)
		p.Labels[v1alpha1.LabelPodGroup] = "train"
		if placement != "" {
			p.Annotations = map[string]string{v1alpha1.AnnotationPlacement: placement}
		}
		return p
	}
	for _, tc := range []struct {
		placements []string
		want       Policy
	}{
		{[]string{"", ""}, LeastLoaded},
		{[]string{"most-loaded", ""}, MostLoaded},
		{[]string{"least-loaded", "least-loaded"}, LeastLoaded},
		{[]string{"packed", ""}, LeastLoaded},
	} {
		g, err := PodGang("ml", "train", []*corev1.Pod{mk("a", tc.placements[0]), mk("b", tc.placements[1])})
		if err != nil {
			t.Fatal(err)
		}
		if g.Policy != tc.want {
			t.Errorf("placements %q: policy %v, want %v", tc.placements, g.Policy, tc.want)
		}
	}
}

func TestPlanHostPorts(t *testing.T) {
	in := st.Uniform("n", 2, 1, 9, 64)
	sshd := st.Pod("hpc", "k-worker-0", "n-0000", "1", "", true)
	withHostPort(sshd, 20000)
	in.Pods = []*corev1.Pod{sshd}
	s := snapshot.Build(in)
	if !s.Nodes[0].HostPortInUse(snapshot.HostPort{Protocol: corev1.ProtocolTCP, Port: 20000}) ||
		s.Nodes[0].HostPortInUse(snapshot.HostPort{Protocol: corev1.ProtocolUDP, Port: 20000}) {
		t.Fatalf("node n-0000 host ports %v, want 20000/TCP only", s.Nodes[0].HostPorts)
	}

	// Two workers with the same port never share a node, nor join the pod holding it.
	ms := workers(2, 1, 1)
	for i := range ms {
		ms[i].HostPorts = []snapshot.HostPort{{Protocol: corev1.ProtocolTCP, Port: 20000}}
	}
	_, err := Plan(s, &Gang{Key: "HPCJob hpc/j", Members: ms, Groups: 1, Policy: MostLoaded})
	if err == nil || !strings.Contains(err.Error(), "have host port 20000/TCP in use") {
		t.Errorf("two workers on port 20000 with one node free: error %v, want one naming the port", err)
	}
	ms[1].HostPorts = []snapshot.HostPort{{Protocol: corev1.ProtocolTCP, Port: 20001}}
	res, err := Plan(s, &Gang{Key: "HPCJob hpc/j", Members: ms, Groups: 1, Policy: MostLoaded})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(res); !slices.Equal(got, []string{"n-0001/0", "n-0001/0"}) {
		t.Errorf("placed on %v; want the port-20000 worker away from n-0000 and its group beside it", got)
	}

	// A pod reserved on the snapshot holds its ports for the next plan.
	next := st.Pod("hpc", "j-worker-0", "n-0001", "1", "", true)
	withHostPort(next, 20001)
	if err := s.Reserve(next); err != nil {
		t.Fatal(err)
	}
	if !s.Nodes[1].HostPortInUse(snapshot.HostPort{Protocol: corev1.ProtocolTCP, Port: 20001}) {
		t.Errorf("reserved pod's port 20001 is not in use on n-0001: %v", s.Nodes[1].HostPorts)
	}
	if len(s.Capacity().Nodes[0].HostPorts) != 0 {
		t.Errorf("an idle cluster holds host ports %v", s.Capacity().Nodes[0].HostPorts)
	}
}
