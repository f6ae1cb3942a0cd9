package policy

import (
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Owners of a CPU in Allocator.owner; non-negative values are slot indices.
const (
	ownerFree     int32 = -1
	ownerReserved int32 = -2
	ownerAbsent   int32 = -3
)

// cluster is the set of cores of one NUMA node that share one L3 cache (or all of the node's
// cores when the host reports no L3). An L3 group spanning several NUMA nodes yields one cluster
// per node.
type cluster struct {
	node     int
	cores    []int
	capacity int
	free     int
	whole    int
}

func (c *cluster) empty() bool { return c.free == c.capacity }

// nodeState holds a NUMA node's counters.
type nodeState struct {
	capacity int
	// allocatable counts online CPUs that are not reserved; allocWhole counts cores with every
	// thread online and none reserved.
	allocatable int
	allocWhole  int
	free        int
	whole       int
	clusters    []int
	cpus        []int
	mems        cpuset.CPUSet
}

func (n *nodeState) empty() bool { return n.free == n.allocatable }

// slot is one exclusive entry.
type slot struct {
	key  Key
	node int
	cpus []int
	set  cpuset.CPUSet
}

// index builds the per-CPU, per-core, per-cluster and per-node tables from the topology and the
// reserved set.
func (a *Allocator) index() {
	t := a.topo
	maxCPU := t.OnlineCPUs.List()[t.NumCPUs()-1]
	a.owner = make([]int32, maxCPU+1)
	a.cpuCore = make([]int, maxCPU+1)
	for i := range a.owner {
		a.owner[i] = ownerAbsent
		a.cpuCore[i] = -1
	}
	a.coreCPUs = make([][]int, len(t.Cores))
	a.coreFree = make([]int, len(t.Cores))
	a.coreCluster = make([]int, len(t.Cores))
	a.nodes = make([]nodeState, len(t.NUMANodes))
	maxClusters := 0
	for ni, n := range t.NUMANodes {
		ns := &a.nodes[ni]
		ns.mems = cpuset.New(int(n.ID))
		ns.cpus = n.CPUs.List()
		byL3 := map[topology.L3ID]int{}
		for _, id := range n.Cores {
			// The allocator's per-core tables are parallel to t.Cores: a core's ID is its position.
			core, ci := t.Cores[id], int(id)
			cl, ok := byL3[core.L3Group]
			if !ok {
				cl = len(a.clusters)
				byL3[core.L3Group] = cl
				a.clusters = append(a.clusters, cluster{node: ni})
				ns.clusters = append(ns.clusters, cl)
			}
			a.clusters[cl].cores = append(a.clusters[cl].cores, ci)
			a.coreCluster[ci] = cl
			a.coreCPUs[ci] = core.CPUs.List()
			reserved := false
			for _, cpu := range a.coreCPUs[ci] {
				a.cpuCore[cpu] = ci
				if a.reserved.Contains(cpu) {
					a.owner[cpu] = ownerReserved
					reserved = true
				} else {
					a.owner[cpu] = ownerFree
					a.coreFree[ci]++
				}
			}
			size := len(a.coreCPUs[ci])
			a.clusters[cl].capacity += size
			a.clusters[cl].free += a.coreFree[ci]
			ns.capacity += size
			ns.free += a.coreFree[ci]
			ns.allocatable += a.coreFree[ci]
			if !reserved && size == a.tpc {
				ns.allocWhole++
			}
			if a.whole(ci) {
				a.clusters[cl].whole++
				ns.whole++
			}
		}
		maxClusters = max(maxClusters, len(ns.clusters))
		a.totalFree += ns.free
	}
	a.allocatable = a.totalFree
	a.touched = make([]int, 0, maxClusters)
	a.order = make([]int, 0, maxClusters)
}

// whole reports whether every thread of core ci is online and free.
func (a *Allocator) whole(ci int) bool {
	return a.coreFree[ci] == a.tpc && len(a.coreCPUs[ci]) == a.tpc
}

func (a *Allocator) ownerOf(cpu int) int32 {
	if cpu < 0 || cpu >= len(a.owner) {
		return ownerAbsent
	}
	return a.owner[cpu]
}

// take moves a free CPU into slot s.
func (a *Allocator) take(s int32, cpu int) {
	ci := a.cpuCore[cpu]
	cl := &a.clusters[a.coreCluster[ci]]
	ns := &a.nodes[cl.node]
	if a.whole(ci) {
		cl.whole--
		ns.whole--
	}
	a.owner[cpu] = s
	a.coreFree[ci]--
	cl.free--
	ns.free--
	a.totalFree--
	a.slots[s].cpus = append(a.slots[s].cpus, cpu)
}

// give returns a held CPU to the shared pool.
func (a *Allocator) give(cpu int) {
	ci := a.cpuCore[cpu]
	cl := &a.clusters[a.coreCluster[ci]]
	ns := &a.nodes[cl.node]
	a.owner[cpu] = ownerFree
	a.coreFree[ci]++
	cl.free++
	ns.free++
	a.totalFree++
	if a.whole(ci) {
		cl.whole++
		ns.whole++
	}
}

func (a *Allocator) newSlot(key Key, node int) int32 {
	var s int32
	if n := len(a.freeSlots); n > 0 {
		s = a.freeSlots[n-1]
		a.freeSlots = a.freeSlots[:n-1]
	} else {
		s = int32(len(a.slots))
		a.slots = append(a.slots, slot{})
	}
	a.slots[s].key = key
	a.slots[s].node = node
	a.byKey[key] = s
	return s
}

// commit finishes a slot whose CPUs have been taken and returns its assignment.
func (a *Allocator) commit(s int32) Assignment {
	sl := &a.slots[s]
	slices.Sort(sl.cpus)
	sl.set = cpuset.New(sl.cpus...)
	a.sharedValid = false
	return a.assignment(s)
}
