package main

import (
	"slices"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// kubeletPacker models, from its documentation, the kubelet's static CPU manager under the
// topology manager's single-numa-node policy (container scope, default options otherwise):
//
//   - Admission: the CPU manager offers a hint for every NUMA node whose available CPUs number at
//     least the request; single-numa-node accepts only one-node hints and, among equally narrow
//     hints, the topology manager keeps the lowest-numbered node. No such node: the pod is
//     rejected (TopologyAffinityError).
//   - Placement inside that node (takeByTopologyNUMAPacked): whole NUMA nodes or sockets first
//     when the request covers one; then whole free physical cores, in core order; then single
//     threads, taking first from the cores with the fewest available threads (partly used cores
//     fill up first), threads in CPU order. It does not look at L3 groups (that needs the
//     prefer-align-cpus-by-uncorecache option).
//   - With full-pcpus-only a request must be a multiple of the threads per core.
//
// Both packers share the pool rules of the comparison (same reserved CPUs, same shared minimum),
// so only the placement decisions differ.
type kubeletPacker struct {
	topo      *topology.Topology
	tpc       int
	minShared int
	wholeOnly bool
	// free is indexed by CPU ID; reserved and absent CPUs are never free.
	free      []bool
	nodeFree  []int // by position in topo.NUMANodes
	totalFree int
	held      map[int][]int
	coreCPUs  [][]int
}

func newKubeletPacker(topo *topology.Topology, reserved []int, minShared int, wholeOnly bool) *kubeletPacker {
	online := topo.OnlineCPUs.List()
	k := &kubeletPacker{
		topo: topo, tpc: topo.ThreadsPerCore(), minShared: minShared, wholeOnly: wholeOnly,
		free: make([]bool, online[len(online)-1]+1), nodeFree: make([]int, len(topo.NUMANodes)),
		held: map[int][]int{}, coreCPUs: make([][]int, len(topo.Cores)),
	}
	for ci, c := range topo.Cores {
		k.coreCPUs[ci] = c.CPUs.List()
	}
	for _, cpu := range online {
		if !slices.Contains(reserved, cpu) {
			k.setFree(cpu, true)
		}
	}
	return k
}

func (k *kubeletPacker) setFree(cpu int, free bool) {
	d := 1
	if !free {
		d = -1
	}
	k.free[cpu] = free
	k.nodeFree[k.topo.NUMANodeIndex(k.topo.NUMANodeOfCPU(cpu))] += d
	k.totalFree += d
}

// admit places request id of n CPUs, reporting the CPUs or false when it is rejected.
func (k *kubeletPacker) admit(id, n int) ([]int, bool) {
	if (k.wholeOnly && n%k.tpc != 0) || k.totalFree-n < k.minShared {
		return nil, false
	}
	for ni, node := range k.topo.NUMANodes { // ascending node ID: the lowest fitting node wins
		if node.CPUs.IsEmpty() || k.nodeFree[ni] < n {
			continue
		}
		cpus := k.takePacked(node, n)
		for _, cpu := range cpus {
			k.setFree(cpu, false)
		}
		k.held[id] = cpus
		return cpus, true
	}
	return nil, false
}

func (k *kubeletPacker) release(id int) {
	for _, cpu := range k.held[id] {
		k.setFree(cpu, true)
	}
	delete(k.held, id)
}

// takePacked chooses n available CPUs of one NUMA node. Taking the whole node when the request
// covers it yields the same CPUs as taking all its cores, so that step needs no code of its own.
func (k *kubeletPacker) takePacked(node topology.NUMANode, n int) []int {
	out := make([]int, 0, n)
	taken := map[int]bool{}
	for _, ci := range node.Cores { // whole free cores, in core order
		cpus := k.coreCPUs[ci]
		if len(cpus) != k.tpc || n-len(out) < len(cpus) || !k.allFree(cpus) {
			continue
		}
		out = append(out, cpus...)
		taken[ci] = true
	}
	if len(out) == n {
		return out
	}
	// Single threads: cores with the fewest available threads first, then core order.
	cores := []int{}
	avail := map[int]int{}
	for _, ci := range node.Cores {
		if taken[ci] {
			continue
		}
		for _, cpu := range k.coreCPUs[ci] {
			if k.free[cpu] {
				avail[ci]++
			}
		}
		if avail[ci] > 0 {
			cores = append(cores, ci)
		}
	}
	slices.SortStableFunc(cores, func(a, b int) int { return avail[a] - avail[b] })
	for _, ci := range cores {
		for _, cpu := range k.coreCPUs[ci] {
			if k.free[cpu] && len(out) < n {
				out = append(out, cpu)
			}
		}
	}
	return out
}

func (k *kubeletPacker) allFree(cpus []int) bool {
	for _, cpu := range cpus {
		if !k.free[cpu] {
			return false
		}
	}
	return true
}
