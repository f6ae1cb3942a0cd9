package nrt

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// MaxCPUs is how many CPUs the CPU lists of a node's NodeResourceTopology may name together: the
// Node's cpu capacity (whole CPUs, rounded up: the kubelet counts the node's logical CPUs), at most
// cpulist.MaxCPUs; cpulist.MaxCPUs when the Node, or its capacity, is unknown. Each CPU of the
// node is free or pinned, in one zone, so a map whose free-cpus and pins lists name more than
// that was not written by a sound agent; its readers refuse it once they have counted that many,
// and so never do work in proportion to the text of a list. The bound comes from the Node, which
// the node's kubelet writes, not from the map under suspicion.
func MaxCPUs(node *corev1.Node) int {
	if node == nil {
		return cpulist.MaxCPUs
	}
	q, ok := node.Status.Capacity[corev1.ResourceCPU]
	if !ok {
		q, ok = node.Status.Allocatable[corev1.ResourceCPU]
	}
	if !ok || q.Sign() <= 0 {
		return cpulist.MaxCPUs
	}
	return int(min(q.Value(), cpulist.MaxCPUs))
}
