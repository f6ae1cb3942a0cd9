package vcluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// PortBlock is how many consecutive ports a virtual cluster takes: slurmctld's, slurmd's,
// sshd's, and the rest for srun (SrunPortRange: one port per srun running at once).
const PortBlock = 16

// blockAt is the block of ports starting at first.
func blockAt(first int32) v1alpha1.VirtualClusterPorts {
	return v1alpha1.VirtualClusterPorts{Slurmctld: first, Slurmd: first + 1, SSH: first + 2, SrunFirst: first + 3, SrunLast: first + PortBlock - 1}
}

// assignPorts returns the virtual cluster's ports: those in its status (or assigned by this
// process before) are kept; otherwise the lowest block of the range that no other virtual
// cluster holds and no pod on the spanned nodes uses, as the placer gives HPCJob workers the
// lowest SSH port free on their node. Ports stay with the virtual cluster until it is deleted.
func (c *Controller) assignPorts(vc *v1alpha1.VirtualCluster, nodes []*corev1.Node) (v1alpha1.VirtualClusterPorts, error) {
	key := vc.Namespace + "/" + vc.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.ports[key]; ok {
		return p, nil
	}
	if p := vc.Status.Ports; p != nil {
		c.ports[key] = *p
		return *p, nil
	}
	taken, err := c.portsTaken(key, nodes)
	if err != nil {
		return v1alpha1.VirtualClusterPorts{}, err
	}
	for first := c.opts.Ports.First; first+PortBlock-1 <= c.opts.Ports.Last; first += PortBlock {
		free := true
		for p := first; p < first+PortBlock && free; p++ {
			free = !taken[p]
		}
		if free {
			c.ports[key] = blockAt(first)
			return blockAt(first), nil
		}
	}
	return v1alpha1.VirtualClusterPorts{}, fmt.Errorf("no block of %d ports of the placer's --slurm-port-range %s is free on the nodes of virtual cluster %s: widen the range, or delete a virtual cluster", PortBlock, c.opts.Ports, key)
}

// portsTaken are the ports of every other virtual cluster, and those the pods on nodes hold on
// their node's network (the virtual cluster's own pods aside).
func (c *Controller) portsTaken(key string, nodes []*corev1.Node) (map[int32]bool, error) {
	taken := map[int32]bool{}
	takeBlock := func(p v1alpha1.VirtualClusterPorts) {
		for port := p.Slurmctld; port <= p.SrunLast; port++ {
			taken[port] = true
		}
	}
	for k, p := range c.ports {
		if k != key {
			takeBlock(p)
		}
	}
	objs, err := c.clusters.List(everything)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		vc, err := decode(o)
		if err == nil && vc.Namespace+"/"+vc.Name != key && vc.Status.Ports != nil {
			takeBlock(*vc.Status.Ports)
		}
	}
	on := map[string]bool{}
	for _, n := range nodes {
		on[n.Name] = true
	}
	pods, err := c.pods.List(everything)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if !on[p.Spec.NodeName] || p.Namespace+"/"+p.Labels[v1alpha1.LabelVirtualCluster] == key {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			for _, port := range ctr.Ports {
				switch {
				case port.HostPort != 0:
					taken[port.HostPort] = true
				case p.Spec.HostNetwork:
					taken[port.ContainerPort] = true
				}
			}
		}
	}
	return taken, nil
}
