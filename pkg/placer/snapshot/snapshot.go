// Package snapshot owns the placer's view of the cluster at one instant: per node its labels,
// taints, allocatable and requested resources, the HPC jobs it runs, the host ports its pods
// hold, and the free cores of each NUMA node from the node agent's NodeResourceTopology —
// corrected by assumptions for pinned pods the agent has not reported yet, so that a stale map
// never double-books cores.
//
// A Cache keeps that view up to date from informer events: each event changes one node's state
// and moves its generation, and Cache.Snapshot brings its snapshot up to date by copying only the
// nodes whose generation moved (kube-scheduler's cache does the same). Build makes a snapshot
// from a list of objects in one go; it is the oracle the cache is tested against, and a
// shorthand for tests. Both are pure: they take API objects and return values; they must not
// talk to the API server, and they never fail on a malformed object (the node is marked and the
// problem reported instead). A snapshot belongs to one goroutine: planners read it, and Reserve
// records a placement on it so that the next gang planned on the same snapshot sees it.
package snapshot

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Snapshot is a view of the cluster. Planners copy what they change; only Reserve changes it.
// It is not safe for concurrent use.
type Snapshot struct {
	// Nodes are sorted by name.
	Nodes []Node

	// orphans name the NodeResourceTopology objects of no node, sorted.
	orphans []string
	// touched are the nodes Reserve changed, for a Cache to restore.
	touched []int32
	// byLoad caches ByLoad's orders; Reserve clears them.
	byLoad [2][]int32
	// capacity caches Capacity.
	capacity *Snapshot
}

// Node is one node as the placer sees it.
type Node struct {
	Name   string
	Labels map[string]string
	// Taints include node.kubernetes.io/unschedulable:NoSchedule for a cordoned node.
	Taints      []corev1.Taint
	Allocatable Resources
	// Requested is the sum of the requests of the node's pods that have not terminated.
	Requested Resources
	// TopologyProblem says why the node cannot take pinned workers (no free-core map, or a
	// malformed one); empty when it can.
	TopologyProblem string
	// ExclusiveAvailable is how many CPUs pinned workers can still take on the node together:
	// the agent's node-wide figure (finegrain.dev/exclusive-available; without it, the free CPUs
	// of every NUMA node minus a shared pool of one CPU) less assumptions. Each zone's FreeCPUs
	// may be larger; the planner never puts more than this on the node in all.
	ExclusiveAvailable int
	// exclusiveCapacity is ExclusiveAvailable with nothing running.
	exclusiveCapacity int
	// Jobs are the HPC jobs (HPCJobs and pod groups) with workers on the node, sorted by key.
	Jobs []JobOnNode
	// HostPorts are the ports the node's pods hold on its network, sorted.
	HostPorts []HostPort
	// Fingerprint and Generation identify the free-core map the node agent published.
	Fingerprint string
	Generation  int64

	// zones are the node's NUMA nodes (ZonesOf), in the order the map lists them.
	zones []Zone
	// assumed are the node's assumptions, sorted by pod; warnings the problems its map has.
	assumed  []Assumption
	warnings []string
}

// Zone is one NUMA node's free resources for pinned workers.
type Zone struct {
	// NUMA is the kernel's NUMA node ID.
	NUMA int
	// FreeCPUs is how many CPUs an exclusive request can still get in this NUMA node.
	FreeCPUs int
	// FreeCPUList is the free CPUs as published (kernel list format), before assumptions.
	FreeCPUList string
	// FreeMemory is the memory left for pinned workers, or -1 when the map does not report it.
	FreeMemory int64

	// allocatableCPUs and allocatableMemory are what the NUMA node offers pinned workers when
	// nothing runs (the map's allocatable).
	allocatableCPUs   int
	allocatableMemory int64
}

// JobOnNode is an HPC job present on a node.
type JobOnNode struct {
	// Key identifies the job: "HPCJob namespace/name" or "pod group namespace/name".
	Key string
	// Exclusive is true when the job wants its nodes to itself.
	Exclusive bool
}

// Assumption is a pinned pod whose cores the placer holds on its node's free-core map until the
// node agent reports the pod in its pins, or the pod is gone.
type Assumption struct {
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	NUMA   int    `json:"numaNode"`
	CPUs   int    `json:"cpus"`
	Memory int64  `json:"memory"`
}

// NodeIndex returns the position of the named node.
func (s *Snapshot) NodeIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(s.Nodes, name, func(n Node, name string) int { return strings.Compare(n.Name, name) })
}

// ZonesOf returns node i's NUMA nodes (read-only).
func (s *Snapshot) ZonesOf(i int) []Zone { return s.Nodes[i].zones }

// Assumed lists the pinned pods bound to a node whose free-core map does not account for them
// yet, ordered by namespace and name; their cores are already subtracted from the zones.
func (s *Snapshot) Assumed() []Assumption {
	var out []Assumption
	for i := range s.Nodes {
		out = append(out, s.Nodes[i].assumed...)
	}
	slices.SortStableFunc(out, compareAssumptions)
	return out
}

// compareAssumptions orders assumptions by their pod's namespace, then its name.
func compareAssumptions(a, b Assumption) int {
	an, ap, _ := strings.Cut(a.Pod, "/")
	bn, bp, _ := strings.Cut(b.Pod, "/")
	return cmp.Or(cmp.Compare(an, bn), cmp.Compare(ap, bp))
}

// Warnings are the problems found in the objects the snapshot was made from (free-core maps that
// could not be read, or that name no node), ordered by node name.
func (s *Snapshot) Warnings() []string {
	var out []string
	orphans := s.orphans
	for i := range s.Nodes {
		for len(orphans) > 0 && orphans[0] < s.Nodes[i].Name {
			out, orphans = append(out, orphanWarning(orphans[0])), orphans[1:]
		}
		out = append(out, s.Nodes[i].warnings...)
	}
	for _, o := range orphans {
		out = append(out, orphanWarning(o))
	}
	return out
}

func orphanWarning(name string) string {
	return "NodeResourceTopology " + name + " has no node of that name; ignored"
}

// CompareLoad compares the CPU load (requested / allocatable) of two nodes given as used and
// allocatable milli-CPUs, exactly: negative when a is less loaded. A node without allocatable
// CPU counts as fully loaded.
func CompareLoad(usedA, allocA, usedB, allocB int64) int {
	switch {
	case allocA <= 0 && allocB <= 0:
		return 0
	case allocA <= 0:
		return 1
	case allocB <= 0:
		return -1
	}
	return cmp.Compare(usedA*allocB, usedB*allocA)
}

// ByLoad returns the node indices ordered by CPU load, least loaded first (or most loaded first
// when mostLoaded is set), ties by name. It is computed once per snapshot state; callers must
// not modify it.
func (s *Snapshot) ByLoad(mostLoaded bool) []int32 {
	i := 0
	if mostLoaded {
		i = 1
	}
	if s.byLoad[i] != nil || len(s.Nodes) == 0 {
		return s.byLoad[i]
	}
	order := make([]int32, len(s.Nodes))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortFunc(order, func(a, b int32) int {
		na, nb := &s.Nodes[a], &s.Nodes[b]
		l := CompareLoad(na.Requested.MilliCPU, na.Allocatable.MilliCPU, nb.Requested.MilliCPU, nb.Allocatable.MilliCPU)
		if mostLoaded {
			l = -l
		}
		return cmp.Or(l, cmp.Compare(a, b))
	})
	s.byLoad[i] = order
	return order
}
