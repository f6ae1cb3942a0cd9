package snapshot

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

const unschedulableTaint = "node.kubernetes.io/unschedulable"

// noMapProblem is the TopologyProblem of a node without a NodeResourceTopology.
const noMapProblem = "no NodeResourceTopology: the node agent has not published a free-core map"

// nodeState is everything one node's part of a snapshot is made from: its Node object, its
// free-core map and the pods that count on it. Build makes one per node from a list of objects;
// a Cache keeps one per node up to date from events.
type nodeState struct {
	name string
	// node is the Node object (nil while there is none: the node is then in no snapshot) and
	// base what it says (newNode).
	node *corev1.Node
	base Node
	// hasMap is true while a NodeResourceTopology of the node's name exists (mapObj); topo is
	// what it says, or mapErr why it cannot be used, read with the CPU bound mapBound (the Node's
	// capacity: nrt.MaxCPUs).
	hasMap   bool
	mapObj   *unstructured.Unstructured
	mapBound int
	topo     *nodeTopology
	mapErr   error
	// pods are the pods counting on the node, one per name, in no particular order.
	pods []podInfo
}

// podIndex returns the position of the named pod in pods, -1 when it is not there.
func (st *nodeState) podIndex(key string) int {
	for i := range st.pods {
		if st.pods[i].key == key {
			return i
		}
	}
	return -1
}

// setNode records the Node object; a map read with another CPU bound is read again.
func (st *nodeState) setNode(n *corev1.Node) {
	st.node, st.base = n, newNode(n)
	if st.hasMap && !st.sameBound(n) {
		st.setMap(st.mapObj)
	}
}

// sameBound reports whether the map was read with the CPU bound of Node n (or there is none).
func (st *nodeState) sameBound(n *corev1.Node) bool {
	return !st.hasMap || st.mapBound == nrt.MaxCPUs(n)
}

func (st *nodeState) setMap(u *unstructured.Unstructured) {
	st.hasMap, st.mapObj, st.mapBound = true, u, nrt.MaxCPUs(st.node)
	st.topo, st.mapErr = parseNRT(u, st.mapBound)
}

// clearMap forgets the map.
func (st *nodeState) clearMap() {
	st.hasMap, st.mapObj, st.mapBound, st.topo, st.mapErr = false, nil, 0, nil, nil
}

// derivation is one node's part of a snapshot while derive makes it.
type derivation struct {
	node *Node
	// topo is the node's free-core map (nil when it has none it can use), zones and exclusive
	// its figures as the pods change them.
	topo      *nodeTopology
	zones     []Zone
	exclusive int
	// pinnedMem is the memory of the node's pinned pods per NUMA node.
	pinnedMem map[int]int64
	// unreported are the pinned pods the map does not list.
	unreported []*podInfo
}

// derive makes the node's part of a snapshot, treating the pods gone names as deleted:
//  1. start from the Node object and what the free-core map says;
//  2. give back the pinned cores of gone pods the map lists;
//  3. count every other pod's requests, job and host ports, and sort its pinned pods into those
//     the map lists (only their memory is charged) and those it does not;
//  4. hold the cores of the unreported ones as assumptions, in pod order (which NUMA node an
//     unannotated pod is assumed on depends on the ones before it);
//  5. bound each zone's memory by what pinned pods take of it.
func (st *nodeState) derive(gone map[string]bool) Node {
	node := st.base
	d := st.fromMap(&node)
	for i := range st.pods {
		if p := &st.pods[i]; len(gone) > 0 && gone[p.podKey()] {
			d.release(p)
		} else {
			d.count(p)
		}
	}
	d.assumeUnreported()
	d.finish()
	return node
}

// fromMap sets what the node's free-core map says, or why it has none it can use.
func (st *nodeState) fromMap(node *Node) *derivation {
	d := &derivation{node: node}
	switch {
	case !st.hasMap:
		node.TopologyProblem = noMapProblem
	case st.mapErr != nil:
		node.TopologyProblem = st.mapErr.Error()
		node.warnings = []string{st.mapErr.Error()}
	default:
		t := st.topo
		node.Fingerprint, node.Generation, node.warnings = t.fingerprint, t.generation, t.warnings
		d.topo, d.zones, d.exclusive = t, slices.Clone(t.zones), t.exclusive
	}
	return d
}

// release returns a gone pod's pinned cores to the NUMA node whose pins list it.
func (d *derivation) release(p *podInfo) {
	if d.topo == nil {
		return
	}
	numa, ok := d.topo.pinned[p.podKey()]
	if !ok {
		return
	}
	d.exclusive += p.pinnedCPUs
	for i := range d.zones {
		if z := &d.zones[i]; z.NUMA == numa {
			z.FreeCPUs += p.pinnedCPUs
			if z.FreeMemory >= 0 {
				z.FreeMemory += p.pinnedMemory
			}
		}
	}
}

// count adds a pod to the node.
func (d *derivation) count(p *podInfo) {
	d.node.Requested.Add(&p.requests)
	if p.hasJob {
		d.node.addJob(p.job)
	}
	d.node.addHostPorts(p.hostPorts)
	if d.topo == nil || p.pinnedCPUs == 0 {
		return
	}
	if numa, ok := d.topo.pinned[p.podKey()]; ok {
		if d.pinnedMem == nil {
			d.pinnedMem = map[int]int64{}
		}
		d.pinnedMem[numa] += p.pinnedMemory
		return
	}
	d.unreported = append(d.unreported, p)
}

// assumeUnreported holds the cores of pinned pods the map does not list, in pod order.
func (d *derivation) assumeUnreported() {
	slices.SortFunc(d.unreported, func(a, b *podInfo) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	for _, p := range d.unreported {
		if d.pinnedMem == nil {
			d.pinnedMem = map[int]int64{}
		}
		z := assumedZone(p, d.zones)
		d.pinnedMem[d.zones[z].NUMA] += p.pinnedMemory
		d.exclusive = max(d.exclusive-p.pinnedCPUs, 0)
		d.node.assumed = append(d.node.assumed, hold(p, d.node.Name, &d.zones[z]))
	}
}

// finish sets the node-wide figures and bounds each zone's memory by its allocatable less what
// pinned pods take, so that a map reporting memory without subtracting pinned pods cannot
// overbook it.
func (d *derivation) finish() {
	if d.topo == nil {
		return
	}
	d.node.ExclusiveAvailable, d.node.exclusiveCapacity = d.exclusive, d.topo.capacity
	for i := range d.zones {
		if z := &d.zones[i]; z.FreeMemory >= 0 && z.allocatableMemory > 0 {
			z.FreeMemory = max(min(z.FreeMemory, z.allocatableMemory-d.pinnedMem[z.NUMA]), 0)
		}
	}
	d.node.zones = d.zones
}

// hold takes a pinned pod's CPUs and memory from a zone and returns the assumption that says so.
func hold(p *podInfo, node string, zone *Zone) Assumption {
	zone.FreeCPUs = max(zone.FreeCPUs-p.pinnedCPUs, 0)
	if zone.FreeMemory >= 0 {
		zone.FreeMemory = max(zone.FreeMemory-p.pinnedMemory, 0)
	}
	return Assumption{Pod: p.podKey(), Node: node, NUMA: zone.NUMA, CPUs: p.pinnedCPUs, Memory: p.pinnedMemory}
}

// assumedZone is where an unreported pinned pod holds its cores: the NUMA node the placer
// annotated, else the one the node agent would pick — the fullest that still fits (it fills
// partly used NUMA nodes first) — else the one with the most free CPUs.
func assumedZone(p *podInfo, zones []Zone) int {
	if p.hasHint {
		for i := range zones {
			if zones[i].NUMA == p.numaHint {
				return i
			}
		}
	}
	best, largest := -1, 0
	for i := range zones {
		if zones[i].FreeCPUs >= p.pinnedCPUs && (best < 0 || zones[i].FreeCPUs < zones[best].FreeCPUs) {
			best = i
		}
		if zones[i].FreeCPUs > zones[largest].FreeCPUs {
			largest = i
		}
	}
	if best < 0 {
		return largest
	}
	return best
}

func newNode(n *corev1.Node) Node {
	alloc := n.Status.Allocatable
	if len(alloc) == 0 {
		alloc = n.Status.Capacity
	}
	node := Node{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: ResourcesOf(alloc)}
	if n.Spec.Unschedulable {
		node.Taints = append(slices.Clone(node.Taints), corev1.Taint{Key: unschedulableTaint, Effect: corev1.TaintEffectNoSchedule})
	}
	return node
}

func (n *Node) addJob(j JobOnNode) {
	i, found := slices.BinarySearchFunc(n.Jobs, j.Key, func(a JobOnNode, k string) int { return cmp.Compare(a.Key, k) })
	if found {
		n.Jobs[i].Exclusive = n.Jobs[i].Exclusive || j.Exclusive
		return
	}
	n.Jobs = slices.Insert(n.Jobs, i, j)
}
