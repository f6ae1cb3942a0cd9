package policy

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Free returns every NUMA node's capacity and free CPUs, in the topology's node order (memory-only
// nodes included, with zero CPUs): the data of the published free-core map.
func (a *Allocator) Free() []NUMAFree {
	out := make([]NUMAFree, 0, len(a.nodes))
	for ni := range a.nodes {
		out = append(out, a.nodeFree(ni))
	}
	return out
}

// freeList is Free restricted to nodes with CPUs, for errors.
func (a *Allocator) freeList() []NUMAFree {
	out := make([]NUMAFree, 0, len(a.nodes))
	for ni := range a.nodes {
		if a.nodes[ni].capacity > 0 {
			out = append(out, a.nodeFree(ni))
		}
	}
	return out
}

func (a *Allocator) nodeFree(ni int) NUMAFree {
	ns := &a.nodes[ni]
	ids := make([]int, 0, ns.free)
	for _, cpu := range ns.cpus {
		if a.owner[cpu] == ownerFree {
			ids = append(ids, cpu)
		}
	}
	spare := max(a.totalFree-a.minShared, 0)
	return NUMAFree{
		NUMANode:         a.topo.NUMANodes[ni].ID,
		Capacity:         ns.capacity,
		Allocatable:      ns.allocatable,
		FreeCPUs:         cpuset.New(ids...),
		FreeWholeCores:   ns.whole,
		Available:        min(ns.free, spare),
		AvailableAligned: min(ns.whole, spare/a.tpc) * a.tpc,
	}
}

// Verify checks the allocator's invariants and counters against its per-CPU table; a non-nil
// error means a bug in this package. Tests call it after every step; the agent may call it in its
// self-check.
func (a *Allocator) Verify() error {
	free, seen := 0, 0
	for cpu, o := range a.owner {
		online := a.topo.OnlineCPUs.Contains(cpu)
		switch {
		case o == ownerAbsent && online:
			return fmt.Errorf("online CPU %d is in no pool", cpu)
		case o != ownerAbsent && !online:
			return fmt.Errorf("CPU %d is not online but is in a pool", cpu)
		case o == ownerReserved && !a.reserved.Contains(cpu), o != ownerReserved && a.reserved.Contains(cpu):
			return fmt.Errorf("CPU %d disagrees with the reserved set %s", cpu, a.reserved)
		case o == ownerFree:
			free++
		case o >= 0:
			if int(o) >= len(a.slots) || a.slots[o].set.Size() == 0 || !a.slots[o].set.Contains(cpu) {
				return fmt.Errorf("CPU %d is owned by slot %d, which does not list it", cpu, o)
			}
			seen++
		}
	}
	if free != a.totalFree {
		return fmt.Errorf("shared pool counter %d, but %d CPUs are free", a.totalFree, free)
	}
	if free < a.minShared {
		return fmt.Errorf("shared pool has %d CPUs, below its minimum of %d", free, a.minShared)
	}
	held := 0
	for key, s := range a.byKey {
		sl := &a.slots[s]
		if sl.key != key {
			return fmt.Errorf("slot %d holds %s but is indexed as %s", s, sl.key, key)
		}
		node := a.topo.NUMANodes[sl.node].ID
		for _, cpu := range sl.cpus {
			if a.owner[cpu] != s {
				return fmt.Errorf("%s lists CPU %d, which it does not own", key, cpu)
			}
			if a.topo.NUMANodeOfCPU(cpu) != node {
				return fmt.Errorf("%s holds CPU %d outside its NUMA node %d", key, cpu, node)
			}
		}
		held += len(sl.cpus)
	}
	if held != seen {
		return fmt.Errorf("exclusive entries list %d CPUs, but %d are owned", held, seen)
	}
	return a.verifyCounters()
}

func (a *Allocator) verifyCounters() error {
	clusters := make([]cluster, len(a.clusters))
	nodes := make([]nodeState, len(a.nodes))
	for ci, cpus := range a.coreCPUs {
		n := 0
		for _, cpu := range cpus {
			if a.owner[cpu] == ownerFree {
				n++
			}
		}
		if n != a.coreFree[ci] {
			return fmt.Errorf("core %d counts %d free threads, but %d are free", ci, a.coreFree[ci], n)
		}
		c := a.coreCluster[ci]
		clusters[c].free += n
		nodes[a.clusters[c].node].free += n
		if a.whole(ci) {
			clusters[c].whole++
			nodes[a.clusters[c].node].whole++
		}
	}
	for c := range clusters {
		if clusters[c].free != a.clusters[c].free || clusters[c].whole != a.clusters[c].whole {
			return fmt.Errorf("cluster %d counts %d free CPUs and %d whole cores, want %d and %d",
				c, a.clusters[c].free, a.clusters[c].whole, clusters[c].free, clusters[c].whole)
		}
	}
	for ni := range nodes {
		if nodes[ni].free != a.nodes[ni].free || nodes[ni].whole != a.nodes[ni].whole {
			return fmt.Errorf("NUMA node %d counts %d free CPUs and %d whole cores, want %d and %d",
				a.topo.NUMANodes[ni].ID, a.nodes[ni].free, a.nodes[ni].whole, nodes[ni].free, nodes[ni].whole)
		}
	}
	return nil
}
