package snapshot_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

func zonesOf(t *testing.T, s *snapshot.Snapshot, node string) []snapshot.Zone {
	t.Helper()
	i, ok := s.NodeIndex(node)
	if !ok {
		t.Fatalf("node %s missing from snapshot", node)
	}
	return s.ZonesOf(i)
}

func TestBuildReadsFreeCoreMaps(t *testing.T) {
	s := snapshot.Build(snapshot.Input{
		Nodes: []*corev1.Node{st.Node("n2", 36, "128Gi", nil), st.Node("n1", 36, "128Gi", nil)},
		Topologies: []*unstructured.Unstructured{
			st.NRT("n1", 7, st.Zone{Free: "1-17", Available: 14, Memory: "64Gi"}, st.Zone{Free: "18-35", Available: -1}),
		},
	})
	if s.Nodes[0].Name != "n1" || s.Nodes[1].Name != "n2" {
		t.Fatalf("nodes not sorted: %s, %s", s.Nodes[0].Name, s.Nodes[1].Name)
	}
	got := zonesOf(t, s, "n1")
	want := []snapshot.Zone{
		{NUMA: 0, FreeCPUs: 14, FreeCPUList: "1-17", FreeMemory: 64 << 30},
		{NUMA: 1, FreeCPUs: 18, FreeCPUList: "18-35", FreeMemory: -1},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(snapshot.Zone{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".allocatableMemory" || p.Last().String() == ".allocatableCPUs"
	}, cmp.Ignore())); d != "" {
		t.Errorf("zones (-want +got):\n%s", d)
	}
	// The zones offer 14 + 18 CPUs, the node 14 in all: node 0's available (14 of 17 free) says
	// the shared pool's minimum binds.
	if got := s.Nodes[0].ExclusiveAvailable; got != 14 {
		t.Errorf("n1 exclusive available %d, want 14", got)
	}
	if s.Nodes[0].Generation != 7 || s.Nodes[0].TopologyProblem != "" {
		t.Errorf("n1 = %+v", s.Nodes[0])
	}
	if !strings.Contains(s.Nodes[1].TopologyProblem, "no NodeResourceTopology") {
		t.Errorf("n2 problem = %q, want no NodeResourceTopology", s.Nodes[1].TopologyProblem)
	}
}

func TestBuildRejectsMalformedMaps(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(u *unstructured.Unstructured)
		want   string
	}{
		{"bad cpu list", func(u *unstructured.Unstructured) { setZoneAttr(u, 0, "finegrain.dev/free-cpus", "3-1") },
			`NodeResourceTopology n1 zone "node-0": attribute finegrain.dev/free-cpus="3-1" is not a CPU list`},
		{"no free cpus", func(u *unstructured.Unstructured) { zone(u, 0)["attributes"] = []any{} },
			`zone "node-0": no finegrain.dev/free-cpus attribute: the node agent has not published a free-core map`},
		{"bad zone name", func(u *unstructured.Unstructured) { zone(u, 1)["name"] = "socket-1" },
			`zone "socket-1": zone name must be node-<NUMA id>`},
		{"duplicate zone", func(u *unstructured.Unstructured) { zone(u, 1)["name"] = "node-0" },
			`lists NUMA node 0 twice`},
		{"zones not a list", func(u *unstructured.Unstructured) { u.Object["zones"] = "none" },
			`does not have the topology.node.k8s.io/v1alpha2 shape`},
		{"bad quantity", func(u *unstructured.Unstructured) {
			zone(u, 0)["resources"] = []any{map[string]any{"name": "cpu", "available": "lots"}}
		}, `does not have the topology.node.k8s.io/v1alpha2 shape`},
		{"only other zone types", func(u *unstructured.Unstructured) {
			zone(u, 0)["type"] = "Socket"
			zone(u, 1)["type"] = "Socket"
		}, `has no zone of type Node`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := st.NRT("n1", 1, st.Zone{Free: "0-17", Available: -1}, st.Zone{Free: "18-35", Available: -1})
			tc.mutate(u)
			s := snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 36, "64Gi", nil)}, Topologies: []*unstructured.Unstructured{u}})
			if got := s.Nodes[0].TopologyProblem; !strings.Contains(got, tc.want) {
				t.Errorf("problem %q\ndoes not contain %q", got, tc.want)
			}
			if len(s.ZonesOf(0)) != 0 {
				t.Errorf("a node with a malformed map has zones %v", s.ZonesOf(0))
			}
			if len(s.Warnings()) == 0 {
				t.Error("no warning for a malformed map")
			}
		})
	}
}

func zone(u *unstructured.Unstructured, i int) map[string]any {
	return u.Object["zones"].([]any)[i].(map[string]any)
}

func setZoneAttr(u *unstructured.Unstructured, i int, name, value string) {
	z := zone(u, i)
	z["attributes"] = []any{map[string]any{"name": name, "value": value}}
}

// A pinned pod bound to a node whose map does not list it yet holds its cores as an assumption
// (in the NUMA node the placer annotated); once the map lists it in its pins, only its memory is
// charged; when it is gone, nothing is.
func TestBuildAssumesUnreportedPinnedPods(t *testing.T) {
	nodes := []*corev1.Node{st.Node("n1", 36, "128Gi", nil)}
	reported := st.Pod("hpc", "a", "n1", "4", "8Gi", true)
	unreported := st.Pod("hpc", "b", "n1", "6", "8Gi", true)
	unreported.Annotations[v1alpha1.AnnotationNUMANode] = "1"
	unreported.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	unannotated := st.Pod("hpc", "c", "n1", "2", "", true)
	shared := st.Pod("web", "d", "n1", "1500m", "1Gi", false)
	done := st.Pod("hpc", "e", "n1", "8", "", true)
	done.Status.Phase = corev1.PodSucceeded
	pending := st.Pod("hpc", "f", "", "8", "", true)
	nrt := st.NRT("n1", 3,
		st.Zone{Free: "4-17", Available: -1, Memory: "64Gi", Pins: "hpc/a/main=0-3"},
		st.Zone{Free: "18-35", Available: -1, Memory: "64Gi"})
	s := snapshot.Build(snapshot.Input{
		Nodes: nodes, Topologies: []*unstructured.Unstructured{nrt}, SchedulerName: v1alpha1.DefaultSchedulerName,
		Pods: []*corev1.Pod{shared, unannotated, reported, done, pending, unreported},
	})
	wantAssumed := []snapshot.Assumption{
		{Pod: "hpc/b", Node: "n1", NUMA: 1, CPUs: 6, Memory: 8 << 30},
		// the fullest NUMA node that fits, as the agent would pick: 1 (12 free after b) over 0 (14)
		{Pod: "hpc/c", Node: "n1", NUMA: 1, CPUs: 2},
	}
	if d := cmp.Diff(wantAssumed, s.Assumed()); d != "" {
		t.Errorf("assumptions (-want +got):\n%s", d)
	}
	z := zonesOf(t, s, "n1")
	if z[0].FreeCPUs != 14 || z[1].FreeCPUs != 10 {
		t.Errorf("free CPUs = %d, %d; want 14, 10", z[0].FreeCPUs, z[1].FreeCPUs)
	}
	if z[0].FreeMemory != 56<<30 || z[1].FreeMemory != 56<<30 {
		t.Errorf("free memory = %d, %d; want 56Gi each", z[0].FreeMemory, z[1].FreeMemory)
	}
	req := s.Nodes[0].Requested
	if req.MilliCPU != 13500 || req.Pods != 4 || req.Memory != 17<<30 {
		t.Errorf("requested = %+v; want 13.5 CPUs, 17Gi, 4 pods", req)
	}

	// The agent catches up: b and c are in the pins, nothing is assumed any more.
	nrt = st.NRT("n1", 4,
		st.Zone{Free: "4-17", Available: -1, Memory: "64Gi", Pins: "hpc/a/main=0-3"},
		st.Zone{Free: "26-35", Available: -1, Memory: "64Gi", Pins: "hpc/b/main=20-25;hpc/c/main=18-19"})
	s = snapshot.Build(snapshot.Input{Nodes: nodes, Topologies: []*unstructured.Unstructured{nrt}, Pods: []*corev1.Pod{reported, unreported, unannotated}})
	if len(s.Assumed()) != 0 {
		t.Errorf("assumed %v after the map lists the pods", s.Assumed())
	}
	if z := zonesOf(t, s, "n1"); z[1].FreeCPUs != 10 {
		t.Errorf("NUMA 1 free = %d, want 10", z[1].FreeCPUs)
	}
}

func TestBuildWarnsOnMalformedPins(t *testing.T) {
	nrt := st.NRT("n1", 1, st.Zone{Free: "0-7", Available: -1, Pins: "hpc/a=0-3;hpc/b/main=4-x"})
	s := snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 8, "8Gi", nil)}, Topologies: []*unstructured.Unstructured{nrt},
		Pods: []*corev1.Pod{st.Pod("hpc", "a", "n1", "2", "", true)}})
	if len(s.Warnings()) != 2 {
		t.Fatalf("warnings = %q, want two", s.Warnings())
	}
	if !strings.Contains(s.Warnings()[0], `pins entry "hpc/a=0-3" ignored`) {
		t.Errorf("warning %q", s.Warnings()[0])
	}
	if len(s.Assumed()) != 1 || s.Assumed()[0].Pod != "hpc/a" {
		t.Errorf("a pod behind a malformed pins entry is not held as assumed: %v", s.Assumed())
	}
}

// An entry that names a pod but no CPUs, or an empty entry, is malformed: the pod is not taken
// for reported, and its cores stay held.
func TestBuildHoldsPodsOfEmptyPinsEntries(t *testing.T) {
	nrt := st.NRT("n1", 1, st.Zone{Free: "1-7", Available: -1, Pins: "hpc/a/main=;;hpc/b/main=0"})
	s := snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 8, "8Gi", nil)}, Topologies: []*unstructured.Unstructured{nrt},
		Pods: []*corev1.Pod{st.Pod("hpc", "a", "n1", "2", "", true), st.Pod("hpc", "b", "n1", "1", "", true)}})
	if len(s.Warnings()) != 2 {
		t.Errorf("warnings = %q, want one per malformed entry", s.Warnings())
	}
	if len(s.Assumed()) != 1 || s.Assumed()[0].Pod != "hpc/a" {
		t.Errorf("assumed %v, want hpc/a only", s.Assumed())
	}
}

// worker is pod name of HPCJob job (UID "uid-<job>") on node, as the placer makes it.
func worker(job, name, node, cpu string) *corev1.Pod {
	p := st.Pod("hpc", name, node, cpu, "", true)
	yes := true
	p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = job, v1alpha1.RoleWorker
	p.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind, Name: job,
		UID: types.UID("uid-" + job), Controller: &yes}}
	return p
}

func TestBuildCordonAndJobs(t *testing.T) {
	n := st.Node("n1", 8, "8Gi", nil)
	n.Spec.Unschedulable = true
	w := worker("j", "j-worker-0", "n1", "2")
	g := st.Pod("ml", "p0", "n1", "1", "", false)
	g.Labels[v1alpha1.LabelPodGroup] = "train"
	g.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	s := snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{n}, Pods: []*corev1.Pod{g, w}, SchedulerName: v1alpha1.DefaultSchedulerName,
		Jobs: map[string]snapshot.JobRecord{"hpc/j": {UID: "uid-j", Exclusive: true, Workers: map[string]string{"j-worker-0": "n1"}}}})
	want := []snapshot.JobOnNode{{Key: "HPCJob hpc/j", Exclusive: true}, {Key: "pod group ml/train"}}
	if d := cmp.Diff(want, s.Nodes[0].Jobs); d != "" {
		t.Errorf("jobs (-want +got):\n%s", d)
	}
	if len(s.Nodes[0].Taints) != 1 || s.Nodes[0].Taints[0].Key != "node.kubernetes.io/unschedulable" {
		t.Errorf("cordoned node taints = %v", s.Nodes[0].Taints)
	}
	if len(n.Spec.Taints) != 0 {
		t.Error("Build changed the input node")
	}
}

// Finding 2 of issue 21: four 10m pods carrying finegrain.dev/exclusive-nodes and a job's labels,
// bound by the default scheduler, fenced every HPC job off their nodes. A pod counts as a job's
// worker, with the job's fence, only when the placer vouches for it; finding 6's NUMA hint counts
// on the same pods only.
func TestBuildTrustsOnlyWhatThePlacerVouchesFor(t *testing.T) {
	fence := func(name, node string) *corev1.Pod {
		p := st.Pod("team-a", name, node, "10m", "", false)
		p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = "fence", v1alpha1.RoleWorker
		p.Labels[v1alpha1.LabelPodGroup] = "fence"
		p.Annotations[v1alpha1.AnnotationExclusiveNodes] = "true"
		p.Spec.SchedulerName = "default-scheduler"
		return p
	}
	forged := worker("j", "j-worker-1", "n2", "2") // claims job j with j's UID, never placed there
	stranger := worker("j", "j-worker-0", "n3", "2")
	stranger.OwnerReferences[0].UID = "uid-other" // another object named j
	placed := worker("j", "j-worker-0", "n4", "2")
	hinted := st.Pod("team-a", "hinted", "n1", "2", "", true)
	hinted.Annotations[v1alpha1.AnnotationNUMANode] = "1"
	hinted.Spec.SchedulerName = "default-scheduler"
	var nodes []*corev1.Node
	var maps []*unstructured.Unstructured
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		nodes = append(nodes, st.Node(name, 8, "8Gi", nil))
		maps = append(maps, st.NRT(name, 1, st.Zone{Free: "0-3", Available: -1}, st.Zone{Free: "4-7", Available: -1}))
	}
	s := snapshot.Build(snapshot.Input{Nodes: nodes, Topologies: maps, SchedulerName: v1alpha1.DefaultSchedulerName,
		Pods: []*corev1.Pod{fence("f1", "n1"), fence("f2", "n2"), fence("f3", "n3"), fence("f4", "n4"), forged, stranger, placed, hinted},
		Jobs: map[string]snapshot.JobRecord{
			"hpc/j":        {UID: "uid-j", Exclusive: true, Workers: map[string]string{"j-worker-0": "n4"}},
			"team-a/fence": {UID: "uid-fence", Exclusive: true, Workers: map[string]string{"f1": "n1"}},
		}})
	for i, want := range [][]snapshot.JobOnNode{nil, nil, nil, {{Key: "HPCJob hpc/j", Exclusive: true}}} {
		if d := cmp.Diff(want, s.Nodes[i].Jobs, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("node %s jobs (-want +got):\n%s", s.Nodes[i].Name, d)
		}
	}
	// The foreign pod's cores are still held, where the agent would put them: the fullest NUMA
	// node that fits (both are equal: the first), not the one its annotation names.
	var got []snapshot.Assumption
	for _, a := range s.Assumed() {
		if a.Pod == "team-a/hinted" {
			got = append(got, a)
		}
	}
	if len(got) != 1 || got[0].NUMA != 0 {
		t.Errorf("foreign pinned pod held as %v, want on NUMA node 0 (its annotation ignored)", got)
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(name, cpu, mem string) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
	}
	sidecar := c("proxy", "500m", "100Mi")
	sidecar.RestartPolicy = &always
	limitOnly := corev1.Container{Name: "l", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), "example.com/fpga": resource.MustParse("2")}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{sidecar, c("init", "3", "1Gi")},
		Containers:     []corev1.Container{c("a", "1", "1Gi"), limitOnly},
		Overhead:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}}
	got := snapshot.PodRequests(pod)
	// containers 2 CPU + sidecar 0.5 = 2.5; init 3 + sidecar 0.5 = 3.5 wins; + 0.1 overhead
	want := snapshot.Resources{MilliCPU: 3600, Memory: 1<<30 + 100<<20, Pods: 1,
		Scalars: []snapshot.Scalar{{Name: "example.com/fpga", Value: 2}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
}

func TestPinnedDemand(t *testing.T) {
	p := st.Pod("hpc", "w", "", "4", "8Gi", true)
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}})
	if cpus, mem := snapshot.PinnedDemand(p); cpus != 4 || mem != 8<<30 {
		t.Errorf("pinned demand = %d CPUs, %d bytes; want 4, 8Gi (the fractional sidecar stays shared)", cpus, mem)
	}
	if cpus, _ := snapshot.PinnedDemand(st.Pod("web", "x", "", "4", "", false)); cpus != 0 {
		t.Errorf("an unlabelled pod is pinned to %d CPUs", cpus)
	}
}

func TestReserveAndGone(t *testing.T) {
	nrt := st.NRT("n1", 1,
		st.Zone{Free: "6-17", Available: -1, Memory: "64Gi", Pins: "hpc/a/main=0-5"},
		st.Zone{Free: "18-35", Available: -1, Memory: "64Gi"})
	a := st.Pod("hpc", "a", "n1", "6", "4Gi", true)
	in := snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 36, "128Gi", nil)}, Topologies: []*unstructured.Unstructured{nrt}, Pods: []*corev1.Pod{a}}
	s := snapshot.Build(in)
	p := st.Pod("hpc", "j-worker-0", "n1", "4", "2Gi", true)
	p.Annotations[v1alpha1.AnnotationNUMANode] = "1"
	p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = "j", v1alpha1.RoleWorker
	if err := s.Reserve(p); err != nil {
		t.Fatal(err)
	}
	if z := zonesOf(t, s, "n1"); z[1].FreeCPUs != 14 || z[1].FreeMemory != 62<<30 {
		t.Errorf("NUMA 1 after reserve: %+v", z[1])
	}
	if n := s.Nodes[0]; n.Requested.MilliCPU != 10000 || len(n.Jobs) != 1 || len(s.Assumed()) != 1 || n.ExclusiveAvailable != 29-4 {
		t.Errorf("node after reserve: requested %d jobs %v assumed %v exclusive available %d (want 29 - 4)",
			n.Requested.MilliCPU, n.Jobs, s.Assumed(), n.ExclusiveAvailable)
	}
	p.Spec.NodeName = "n9"
	if err := s.Reserve(p); err == nil || !strings.Contains(err.Error(), `reserve pod hpc/j-worker-0: node "n9" is not in the snapshot`) {
		t.Errorf("reserve on a missing node: %v", err)
	}

	in.Gone = map[string]bool{"hpc/a": true}
	s = snapshot.Build(in)
	if z := zonesOf(t, s, "n1"); z[0].FreeCPUs != 18 || z[0].FreeMemory != 64<<30 || s.Nodes[0].Requested.MilliCPU != 0 {
		t.Errorf("with a gone: NUMA 0 %+v, requested %d", z[0], s.Nodes[0].Requested.MilliCPU)
	}
	if got := s.Nodes[0].ExclusiveAvailable; got != 29+6 {
		t.Errorf("with a gone: exclusive available %d, want 29 + its 6 CPUs", got)
	}
}

// setAttribute sets (or with value "", removes) a top-level attribute of a NodeResourceTopology.
func setAttribute(u *unstructured.Unstructured, name, value string) {
	var out []any
	for _, a := range u.Object["attributes"].([]any) {
		if a.(map[string]any)["name"] != name {
			out = append(out, a)
		}
	}
	if value != "" {
		out = append(out, map[string]any{"name": name, "value": value})
	}
	u.Object["attributes"] = out
}

// TestBuildNodeWideExclusive: zones are counted each on its own, the node-wide figure bounds
// their sum; without it (an older agent) a shared pool of one CPU is assumed; unreported pinned
// pods come off it; Capacity is the node with nothing running.
func TestBuildNodeWideExclusive(t *testing.T) {
	build := func(exclusive, minShared string, pods ...*corev1.Pod) *snapshot.Snapshot {
		u := st.NRT("n1", 1, st.Zone{Free: "0-3", Available: -1}, st.Zone{Free: "4-7", Available: -1})
		setAttribute(u, "finegrain.dev/exclusive-available", exclusive)
		setAttribute(u, "finegrain.dev/min-shared-cpus", minShared)
		return snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{st.Node("n1", 8, "8Gi", nil)}, Topologies: []*unstructured.Unstructured{u}, Pods: pods})
	}
	for _, tt := range []struct {
		name, exclusive, minShared string
		want, capacity             int
		warning                    string
	}{
		{"published", "5", "3", 5, 5, ""},
		{"older agent", "", "", 7, 7, ""},
		{"malformed", "lots", "-2", 7, 7, "finegrain.dev/exclusive-available=\"lots\" is not a count of CPUs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := build(tt.exclusive, tt.minShared)
			if got := s.Nodes[0].ExclusiveAvailable; got != tt.want {
				t.Errorf("exclusive available %d, want %d", got, tt.want)
			}
			if got := strings.Join(s.Warnings(), "\n"); (tt.warning == "") != (got == "") || !strings.Contains(got, tt.warning) {
				t.Errorf("warnings %q, want %q", got, tt.warning)
			}
			c := s.Capacity()
			if got := c.Nodes[0].ExclusiveAvailable; got != tt.capacity {
				t.Errorf("capacity: exclusive available %d, want %d", got, tt.capacity)
			}
		})
	}

	busy := st.Pod("hpc", "w", "n1", "3", "", true)
	busy.Annotations[v1alpha1.AnnotationNUMANode] = "0"
	s := build("7", "1", busy)
	if got := s.Nodes[0].ExclusiveAvailable; got != 4 || len(s.Assumed()) != 1 {
		t.Errorf("with an unreported 3-CPU pin: exclusive available %d (assumed %v), want 4", got, s.Assumed())
	}
	c := s.Capacity()
	if z := c.ZonesOf(0); c.Nodes[0].ExclusiveAvailable != 7 || c.Nodes[0].Requested.MilliCPU != 0 || z[0].FreeCPUs != 4 || z[1].FreeCPUs != 4 {
		t.Errorf("capacity: node %+v zones %+v, want 7 exclusive CPUs, nothing requested, both zones free", c.Nodes[0], z)
	}
	if s.Capacity() != c {
		t.Error("Capacity is not computed once")
	}
}

func TestByLoadFollowsReserve(t *testing.T) {
	s := snapshot.Build(snapshot.Input{
		Nodes: []*corev1.Node{st.Node("n1", 8, "8Gi", nil), st.Node("n2", 8, "8Gi", nil)},
		Pods:  []*corev1.Pod{st.Pod("web", "a", "n2", "2", "", false)},
	})
	if got := s.ByLoad(false); got[0] != 0 || s.ByLoad(true)[0] != 1 {
		t.Fatalf("least loaded first %v, most loaded first %v", got, s.ByLoad(true))
	}
	if err := s.Reserve(st.Pod("web", "b", "n1", "4", "", false)); err != nil {
		t.Fatal(err)
	}
	if got := s.ByLoad(false); got[0] != 1 {
		t.Errorf("after reserving 4 CPUs on n1, least loaded first is %v", got)
	}
}

// Finding 3 of issue 21: a map whose CPU lists name more CPUs than its Node has (any node may
// write any map until the node-scoped policy is in place, and one hostile map must not cost the
// placer memory or time in proportion to its text) is a warning, and the node takes no pinned
// workers; the cache reads it again when the Node's capacity changes.
func TestOversizedMapSkipsTheNode(t *testing.T) {
	small := st.Node("n1", 8, "8Gi", nil)
	hostile := st.NRT("n1", 1, st.Zone{Free: "0-7", Available: -1, Pins: strings.Repeat("a/b/c=0-16383;", 5_000) + "a/b/c=0"})
	s := snapshot.Build(snapshot.Input{Nodes: []*corev1.Node{small}, Topologies: []*unstructured.Unstructured{hostile}})
	want := "attribute finegrain.dev/pins: the map's free-cpus and pins lists name more than the node's 8 CPUs"
	if p := s.Nodes[0].TopologyProblem; !strings.Contains(p, want) {
		t.Errorf("TopologyProblem %q, want it to say %q", p, want)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], want) {
		t.Errorf("warnings %q, want one saying %q", w, want)
	}

	sound := st.NRT("n1", 2, st.Zone{Free: "0-15", Available: -1})
	c := snapshot.NewCache(v1alpha1.DefaultSchedulerName)
	c.SetNode(small)
	c.SetTopology(sound)
	if p := c.Snapshot().Nodes[0].TopologyProblem; p == "" {
		t.Error("a map of 16 CPUs on a node of 8 was used")
	}
	c.SetNode(st.Node("n1", 16, "8Gi", nil))
	if p := c.Snapshot().Nodes[0].TopologyProblem; p != "" {
		t.Errorf("the node grew to 16 CPUs, its map of 16 is still refused: %s", p)
	}
}
