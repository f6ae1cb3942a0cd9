package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Input is the API objects a snapshot is built from.
type Input struct {
	Nodes []*corev1.Node
	// Topologies are NodeResourceTopology objects, one per node, named after it.
	Topologies []*unstructured.Unstructured
	// Pods are all pods; pending and terminated ones are skipped.
	Pods []*corev1.Pod
	// Gone names pods ("namespace/name") to treat as deleted: their requests are not counted
	// and the cores the free-core map lists them pinned to are free again. It answers "what if
	// these pods were gone" (shrinking an elastic job).
	Gone map[string]bool
}

// HPCJobKey is the JobOnNode key of an HPCJob.
func HPCJobKey(namespace, name string) string { return "HPCJob " + namespace + "/" + name }

// PodGroupKey is the JobOnNode key of a gang of plain pods.
func PodGroupKey(namespace, name string) string { return "pod group " + namespace + "/" + name }

// JobOf returns the HPC job a pod is a worker of, if any.
func JobOf(pod *corev1.Pod) (JobOnNode, bool) {
	exclusive := pod.Annotations[v1alpha1.AnnotationExclusiveNodes] == "true"
	if job := pod.Labels[v1alpha1.LabelJob]; job != "" && pod.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker {
		return JobOnNode{Key: HPCJobKey(pod.Namespace, job), Exclusive: exclusive}, true
	}
	if group := pod.Labels[v1alpha1.LabelPodGroup]; group != "" {
		return JobOnNode{Key: PodGroupKey(pod.Namespace, group), Exclusive: exclusive}, true
	}
	return JobOnNode{}, false
}

const unschedulableTaint = "node.kubernetes.io/unschedulable"

// Build makes a snapshot. It never fails: an object it cannot read is reported in Warnings (and
// a node with an unreadable free-core map gets a TopologyProblem).
func Build(in Input) *Snapshot {
	s := &Snapshot{Nodes: make([]Node, 0, len(in.Nodes))}
	for _, n := range in.Nodes {
		s.Nodes = append(s.Nodes, newNode(n))
	}
	slices.SortFunc(s.Nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	s.Nodes = slices.CompactFunc(s.Nodes, func(a, b Node) bool { return a.Name == b.Name })

	topos := make([]*nodeTopology, len(s.Nodes))
	for _, u := range in.Topologies {
		i, ok := s.NodeIndex(u.GetName())
		if !ok {
			s.Warnings = append(s.Warnings, fmt.Sprintf("NodeResourceTopology %s has no node of that name; ignored", u.GetName()))
			continue
		}
		t, err := parseNRT(u)
		if err != nil {
			s.Nodes[i].TopologyProblem = err.Error()
			s.Warnings = append(s.Warnings, err.Error())
			continue
		}
		s.Warnings = append(s.Warnings, t.warnings...)
		topos[i] = t
		s.Nodes[i].Fingerprint, s.Nodes[i].Generation = t.fingerprint, t.generation
	}
	for i := range s.Nodes {
		if topos[i] == nil && s.Nodes[i].TopologyProblem == "" {
			s.Nodes[i].TopologyProblem = "no NodeResourceTopology: the node agent has not published a free-core map"
		}
	}

	index := make(map[string]int, len(s.Nodes))
	for i := range s.Nodes {
		index[s.Nodes[i].Name] = i
	}
	pinnedMem := make([]map[int]int64, len(s.Nodes))
	var unreported []*corev1.Pod
	for _, p := range in.Pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		i, ok := index[p.Spec.NodeName]
		if !ok {
			continue
		}
		if in.Gone[p.Namespace+"/"+p.Name] {
			if topos[i] != nil {
				topos[i].release(p)
			}
			continue
		}
		node := &s.Nodes[i]
		req := PodRequests(p)
		node.Requested.Add(&req)
		if job, ok := JobOf(p); ok {
			node.addJob(job)
		}
		node.addHostPorts(HostPortsOf(p))
		if topos[i] == nil {
			continue
		}
		cpus, mem := PinnedDemand(p)
		if cpus == 0 {
			continue
		}
		if numa, ok := topos[i].pinned[p.Namespace+"/"+p.Name]; ok {
			if pinnedMem[i] == nil {
				pinnedMem[i] = map[int]int64{}
			}
			pinnedMem[i][numa] += mem
			continue
		}
		unreported = append(unreported, p)
	}
	// Assumptions in a fixed order: which NUMA node an unannotated pod is assumed on depends
	// on the ones before it.
	slices.SortFunc(unreported, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range unreported {
		i := index[p.Spec.NodeName]
		if pinnedMem[i] == nil {
			pinnedMem[i] = map[int]int64{}
		}
		s.assume(p, &s.Nodes[i], topos[i], pinnedMem[i])
	}

	for i := range s.Nodes {
		node := &s.Nodes[i]
		node.ZoneStart = len(s.Zones)
		if t := topos[i]; t != nil {
			node.ExclusiveAvailable, node.exclusiveCapacity = t.exclusive, t.capacity
			for _, z := range t.zones {
				if z.FreeMemory >= 0 && z.allocatableMemory > 0 {
					z.FreeMemory = max(min(z.FreeMemory, z.allocatableMemory-pinnedMem[i][z.NUMA]), 0)
				}
				s.Zones = append(s.Zones, z)
			}
		}
		node.ZoneEnd = len(s.Zones)
	}
	return s
}

// assume holds a bound pinned pod's CPUs and memory on its NUMA node because the node agent
// does not list it in its pins yet. pinnedMem collects the memory of every pinned pod per NUMA
// node, so that a map reporting memory without subtracting pinned pods cannot overbook it.
func (s *Snapshot) assume(p *corev1.Pod, node *Node, t *nodeTopology, pinnedMem map[int]int64) {
	cpus, mem := PinnedDemand(p)
	zone := &t.zones[assumedZone(p, t.zones, cpus)]
	pinnedMem[zone.NUMA] += mem
	t.exclusive = max(t.exclusive-cpus, 0)
	zone.FreeCPUs = max(zone.FreeCPUs-cpus, 0)
	if zone.FreeMemory >= 0 {
		zone.FreeMemory = max(zone.FreeMemory-mem, 0)
	}
	s.Assumed = append(s.Assumed, Assumption{Pod: p.Namespace + "/" + p.Name, Node: node.Name, NUMA: zone.NUMA, CPUs: cpus, Memory: mem})
}

// assumedZone is where an unreported pinned pod holds its cores: the NUMA node the placer
// annotated, else the one the node agent would pick — the fullest that still fits (it fills
// partly used NUMA nodes first) — else the one with the most free CPUs.
func assumedZone(p *corev1.Pod, zones []Zone, cpus int) int {
	if v, ok := p.Annotations[v1alpha1.AnnotationNUMANode]; ok {
		if id, err := strconv.Atoi(v); err == nil {
			for i := range zones {
				if zones[i].NUMA == id {
					return i
				}
			}
		}
	}
	best, largest := -1, 0
	for i := range zones {
		if zones[i].FreeCPUs >= cpus && (best < 0 || zones[i].FreeCPUs < zones[best].FreeCPUs) {
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

// release returns a gone pod's pinned cores to the NUMA node whose pins list it.
func (t *nodeTopology) release(p *corev1.Pod) {
	numa, ok := t.pinned[p.Namespace+"/"+p.Name]
	if !ok {
		return
	}
	delete(t.pinned, p.Namespace+"/"+p.Name)
	cpus, mem := PinnedDemand(p)
	t.exclusive += cpus
	for i := range t.zones {
		if z := &t.zones[i]; z.NUMA == numa {
			z.FreeCPUs += cpus
			if z.FreeMemory >= 0 {
				z.FreeMemory += mem
			}
		}
	}
}

// Reserve records on the snapshot a pod just placed (spec.nodeName set, and for a pinned pod
// the NUMA node annotation): its requests count on its node, its job on the node's job list and
// its host ports among the node's, and its pinned cores are held as an assumption on its NUMA
// node.
func (s *Snapshot) Reserve(p *corev1.Pod) error {
	i, ok := s.NodeIndex(p.Spec.NodeName)
	if !ok {
		return fmt.Errorf("reserve pod %s/%s: node %q is not in the snapshot", p.Namespace, p.Name, p.Spec.NodeName)
	}
	node := &s.Nodes[i]
	req := PodRequests(p)
	node.Requested.Add(&req)
	if job, ok := JobOf(p); ok {
		node.addJob(job)
	}
	node.addHostPorts(HostPortsOf(p))
	s.byLoad = [2][]int32{}
	cpus, mem := PinnedDemand(p)
	zones := s.Zones[node.ZoneStart:node.ZoneEnd]
	if cpus == 0 || len(zones) == 0 {
		return nil
	}
	zone := &zones[assumedZone(p, zones, cpus)]
	zone.FreeCPUs = max(zone.FreeCPUs-cpus, 0)
	node.ExclusiveAvailable = max(node.ExclusiveAvailable-cpus, 0)
	if zone.FreeMemory >= 0 {
		zone.FreeMemory = max(zone.FreeMemory-mem, 0)
	}
	s.Assumed = append(s.Assumed, Assumption{Pod: p.Namespace + "/" + p.Name, Node: node.Name, NUMA: zone.NUMA, CPUs: cpus, Memory: mem})
	return nil
}

// Capacity returns the cluster as it would be with no pod running: nothing requested, no HPC
// job on any node, every NUMA node's allocatable CPUs and memory free for pinned workers, and
// every node's CPUs but the agent's shared-pool minimum available to them together. A gang that
// does not fit it can never fit as it is. It is computed once per snapshot (Reserve does not
// change it) and must not be reserved on.
func (s *Snapshot) Capacity() *Snapshot {
	if s.capacity != nil {
		return s.capacity
	}
	c := &Snapshot{Nodes: make([]Node, len(s.Nodes)), Zones: make([]Zone, len(s.Zones))}
	for i, n := range s.Nodes {
		n.Requested, n.Jobs, n.HostPorts = Resources{}, nil, nil
		n.ExclusiveAvailable = n.exclusiveCapacity
		c.Nodes[i] = n
	}
	for i, z := range s.Zones {
		z.FreeCPUs = z.allocatableCPUs
		if z.FreeMemory >= 0 && z.allocatableMemory > 0 {
			z.FreeMemory = z.allocatableMemory
		}
		c.Zones[i] = z
	}
	c.capacity = c
	s.capacity = c
	return c
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
