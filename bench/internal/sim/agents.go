package sim

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// agentNode is one simulated node running the node agent: its real allocator, its Node object
// and the NodeResourceTopology object the agent's report builder writes for it.
type agentNode struct {
	name  string
	uid   types.UID
	alloc *policy.Allocator
	obj   *corev1.Node
	// gen counts the allocator's changes, as the agent's state generation does.
	gen uint64
	// nrt is the published object, nil when the allocator changed since it was built.
	nrt *unstructured.Unstructured
}

// newFinegrain builds nodes agents of topo with reserved CPUs kept from pods (the Node objects'
// allocatable), for a trace of jobs; the placer reuses a snapshot for ttl.
func newFinegrain(s Strategy, topo *topology.Topology, nodes, reserved, jobs int, ttl time.Duration) (*finegrain, error) {
	f := &finegrain{
		strategy: s, topo: topo, maxNUMA: maxNUMACPUs(topo), byName: map[string]int{}, ttl: ttl,
		pods: map[types.UID]*corev1.Pod{}, jobs: make([]*v1alpha1.HPCJob, jobs), held: make([][]*corev1.Pod, jobs),
		allocatable: topo.NumCPUs() - reserved, pinned: make([]int, nodes),
		jobsOn: make([]int, nodes), exclusiveOn: make([]int, nodes), cache: snapshot.NewCache(v1alpha1.DefaultSchedulerName),
	}
	var mem uint64
	for _, n := range topo.NUMANodes {
		mem += n.MemoryBytes
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(topo.NumCPUs()-reserved), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(mem), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
	}
	capacity := res.DeepCopy()
	capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(topo.NumCPUs()), resource.DecimalSI)
	for i := 0; i < nodes; i++ {
		a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", nodeName(i), err)
		}
		name := nodeName(i)
		f.nodes = append(f.nodes, agentNode{
			name: name, uid: types.UID("uid-" + name), alloc: a,
			obj: &corev1.Node{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
				ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
				Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: res},
			},
		})
		f.byName[name] = i
		f.cache.SetNode(f.nodes[i].obj)
	}
	return f, nil
}

// maxPodsPerNode is the kubelet's default --max-pods.
const maxPodsPerNode = 110

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i+1) }

func maxNUMACPUs(t *topology.Topology) int {
	most := 0
	for _, n := range t.NUMANodes {
		most = max(most, n.CPUs.Size())
	}
	return most
}

// view returns the placer's snapshot at now and its version. Like the controller, it reuses a
// snapshot for SnapshotTTL after taking it, placements made meanwhile recorded on it with
// Reserve; after that it takes it again if the cluster changed, having told the cache what the
// informers would have: the NodeResourceTopology each agent whose state changed publishes
// (report.Build over its allocator, converted as the publisher does) and the pods bound and
// deleted.
func (f *finegrain) view(now time.Duration, fresh bool) (uint64, error) {
	if f.snap != nil && (!f.dirty || (!fresh && now-f.snapAt < f.ttl)) {
		return f.version, nil
	}
	for i := range f.nodes {
		n := &f.nodes[i]
		if n.nrt != nil {
			continue
		}
		obj, err := report.Build(report.NodeRef{Name: n.name, UID: n.uid}, f.topo,
			report.SnapshotOf(n.alloc, n.gen, f.podName), report.Options{WholeCores: true})
		if err != nil {
			return 0, fmt.Errorf("publish free-core map of %s: %w", n.name, err)
		}
		if n.nrt, err = nrt.ToUnstructured(obj); err != nil {
			return 0, fmt.Errorf("publish free-core map of %s: %w", n.name, err)
		}
		f.cache.SetTopology(n.nrt)
	}
	for _, e := range f.podEvents {
		if e.deleted {
			f.cache.DeletePod(e.pod.Namespace, e.pod.Name)
		} else {
			f.cache.SetPod(e.pod)
		}
	}
	f.podEvents = f.podEvents[:0]
	s := f.cache.Snapshot()
	if w := s.Warnings(); len(w) > 0 {
		return 0, fmt.Errorf("the placer could not read the simulated cluster: %v", w)
	}
	f.snap, f.snapAt, f.dirty = s, now, false
	f.version++
	return f.version, nil
}

func (f *finegrain) podName(uid string) (namespace, name string) {
	if p, ok := f.pods[types.UID(uid)]; ok {
		return p.Namespace, p.Name
	}
	return "", ""
}

func (f *finegrain) changed(node int) {
	n := &f.nodes[node]
	n.gen++
	n.nrt = nil
	f.dirty = true
}

// verify checks every allocator's invariants, that the allocators hold exactly the bound workers'
// CPUs, and that every worker is pinned on the NUMA node the placer chose for it.
func (f *finegrain) verify() error {
	want := make([]int, len(f.nodes))
	for _, p := range f.pods {
		if cpus, _ := snapshot.PinnedDemand(p); cpus > 0 {
			want[f.byName[p.Spec.NodeName]] += cpus
		}
	}
	for i := range f.nodes {
		a := f.nodes[i].alloc
		if err := a.Verify(); err != nil {
			return fmt.Errorf("node %s: %w", f.nodes[i].name, err)
		}
		held := 0
		for _, asg := range a.Assignments() {
			held += asg.CPUs.Size()
			p, ok := f.pods[types.UID(asg.Key.PodUID)]
			if !ok {
				return fmt.Errorf("node %s: %s holds CPUs %s but its pod is gone", f.nodes[i].name, asg.Key, asg.CPUs)
			}
			if hint := p.Annotations[v1alpha1.AnnotationNUMANode]; hint != strconv.Itoa(int(asg.NUMANode)) {
				return fmt.Errorf("node %s: worker %s was placed on NUMA node %s but pinned on %d", f.nodes[i].name, p.Name, hint, asg.NUMANode)
			}
		}
		if held != want[i] {
			return fmt.Errorf("node %s: allocator holds %d CPUs, bound workers ask for %d", f.nodes[i].name, held, want[i])
		}
	}
	return nil
}
