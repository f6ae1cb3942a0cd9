package snapshot

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Reserve records on the snapshot a pod just placed (spec.nodeName set, and for a pinned pod
// the NUMA node annotation): its requests count on its node, its job on the node's job list and
// its host ports among the node's, and its pinned cores are held as an assumption on its NUMA
// node. It copies what it changes: a Cache's nodes share their slices with its snapshot.
func (s *Snapshot) Reserve(p *corev1.Pod) error {
	i, ok := s.NodeIndex(p.Spec.NodeName)
	if !ok {
		return fmt.Errorf("reserve pod %s/%s: node %q is not in the snapshot", p.Namespace, p.Name, p.Spec.NodeName)
	}
	node := &s.Nodes[i]
	node.Requested.Scalars = slices.Clone(node.Requested.Scalars)
	node.Jobs, node.HostPorts = slices.Clone(node.Jobs), slices.Clone(node.HostPorts)
	s.touched = append(s.touched, int32(i))
	s.byLoad = [2][]int32{}
	info := newPodInfo(p, "", nil)
	node.Requested.Add(&info.requests)
	if info.hasJob {
		node.addJob(info.job)
	}
	node.addHostPorts(info.hostPorts)
	if info.pinnedCPUs == 0 || len(node.zones) == 0 {
		return nil
	}
	node.zones = slices.Clone(node.zones)
	z := assumedZone(&info, node.zones)
	node.ExclusiveAvailable = max(node.ExclusiveAvailable-info.pinnedCPUs, 0)
	node.assumed = append(slices.Clip(node.assumed), hold(&info, node.Name, &node.zones[z]))
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
	c := &Snapshot{Nodes: make([]Node, len(s.Nodes))}
	total := 0
	for i := range s.Nodes {
		total += len(s.Nodes[i].zones)
	}
	zones := make([]Zone, 0, total) // one array for every node's zones
	for i, n := range s.Nodes {
		n.Requested, n.Jobs, n.HostPorts, n.assumed = Resources{}, nil, nil, nil
		n.ExclusiveAvailable = n.exclusiveCapacity
		start := len(zones)
		zones = append(zones, n.zones...)
		n.zones = zones[start:len(zones):len(zones)]
		for j := range n.zones {
			z := &n.zones[j]
			z.FreeCPUs = z.allocatableCPUs
			if z.FreeMemory >= 0 && z.allocatableMemory > 0 {
				z.FreeMemory = z.allocatableMemory
			}
		}
		c.Nodes[i] = n
	}
	c.capacity = c
	s.capacity = c
	return c
}
