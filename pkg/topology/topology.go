// Package topology owns the host model finegrain schedules onto: sockets, NUMA nodes (with their
// memory and distances), physical cores with their SMT threads, last-level (L3) cache groups, and
// the isolated and offline CPUs. A Topology is a plain value built once — by Discover from a sysfs
// tree, or by New from per-CPU records in tests — and never changed afterwards; every CPU list is a
// k8s.io/utils/cpuset value that prints in kernel list format ("0-3,8"). This package reads sysfs
// and nothing else: it must not decide allocations or touch cgroups.
package topology

import (
	"k8s.io/utils/cpuset"
)

// Topology is an immutable description of one host. Slices are ordered by ID and must be treated
// as read-only by callers; the query methods below never allocate.
//
// Invariants (checked by New):
//   - every online CPU belongs to exactly one socket, one NUMA node and one core;
//   - a core's CPUs share its socket and NUMA node; a NUMA node's cores are a subset of one socket
//     only when the hardware says so (sub-NUMA clustering and NPS modes split a socket);
//   - L3 groups partition the online CPUs when the host reports L3 caches at all;
//   - OnlineCPUs, OfflineCPUs are disjoint; IsolatedCPUs is a subset of OnlineCPUs.
type Topology struct {
	// OnlineCPUs are the CPUs the kernel schedules on.
	OnlineCPUs cpuset.CPUSet
	// OfflineCPUs are present or possible CPUs that are currently offline.
	OfflineCPUs cpuset.CPUSet
	// IsolatedCPUs are online CPUs removed from the scheduler's load balancing (isolcpus=).
	IsolatedCPUs cpuset.CPUSet

	Sockets   []Socket
	NUMANodes []NUMANode
	Cores     []Core
	L3Groups  []L3Group

	// cpus is indexed by CPU number; entries for CPUs that are not online have Online == false.
	cpus []CPU
	// numaIndex maps a NUMA node ID to its position in NUMANodes (-1 when absent).
	numaIndex []int
	// socketIndex maps a socket (physical package) ID to its position in Sockets (-1 when absent).
	socketIndex    []int
	threadsPerCore int
}

// Socket is one physical package.
type Socket struct {
	// ID is the kernel's physical_package_id.
	ID   int
	CPUs cpuset.CPUSet
	// Cores are indices into Topology.Cores, in core order.
	Cores []int
	// NUMANodes are the IDs of the NUMA nodes holding this socket's CPUs.
	NUMANodes []int
}

// NUMANode is one memory domain. A node without CPUs (CXL or HBM memory) has an empty CPUs set and
// no cores.
type NUMANode struct {
	// ID is the kernel's node number.
	ID   int
	CPUs cpuset.CPUSet
	// MemoryBytes is the node's total memory (MemTotal of its meminfo).
	MemoryBytes uint64
	// Distances is the node's row of the SLIT distance table: Distances[i] is the distance to
	// Topology.NUMANodes[i]. Local distance is conventionally 10.
	Distances []int
	// Cores are indices into Topology.Cores, in core order.
	Cores []int
	// L3Groups are indices into Topology.L3Groups whose CPUs lie in this node.
	L3Groups []int
}

// Core is one physical core with its hardware threads.
type Core struct {
	// ID is a machine-wide logical core number (0..len(Cores)-1), ordered by the core's lowest
	// CPU; it matches the CORE column of `lscpu -p`.
	ID int
	// CoreID is the kernel's core_id, which is only unique within a socket (and die) and may have
	// gaps.
	CoreID int
	// Die is the kernel's die_id within the socket (0 where the kernel reports no dies).
	Die      int
	Socket   int
	NUMANode int
	// L3Group is an index into Topology.L3Groups, or -1 when the host reports no L3 cache.
	L3Group int
	// CPUs are the core's online hardware threads (its SMT siblings).
	CPUs cpuset.CPUSet
}

// L3Group is a set of cores sharing one last-level cache.
type L3Group struct {
	// ID is a machine-wide logical cache number (0..len(L3Groups)-1), ordered by lowest CPU; it
	// matches the L3 field of lscpu's CACHE column.
	ID   int
	CPUs cpuset.CPUSet
	// NUMANode is the node holding the group's CPUs, or -1 when the group spans several nodes.
	NUMANode int
	// Cores are indices into Topology.Cores, in core order.
	Cores []int
	// SizeBytes is the cache size when sysfs reports it, else 0.
	SizeBytes uint64
}

// CPU is where one logical CPU sits in the topology.
type CPU struct {
	ID       int
	Online   bool
	Socket   int
	NUMANode int
	// Core is an index into Topology.Cores.
	Core int
	// L3Group is an index into Topology.L3Groups, or -1.
	L3Group int
}

// CPU returns the placement of one logical CPU; ok is false for a CPU that is not online.
func (t *Topology) CPU(id int) (cpu CPU, ok bool) {
	if id < 0 || id >= len(t.cpus) || !t.cpus[id].Online {
		return CPU{}, false
	}
	return t.cpus[id], true
}

// NUMANode returns the NUMA node with the given kernel ID.
func (t *Topology) NUMANode(id int) (NUMANode, bool) {
	if id < 0 || id >= len(t.numaIndex) || t.numaIndex[id] < 0 {
		return NUMANode{}, false
	}
	return t.NUMANodes[t.numaIndex[id]], true
}

// NUMANodeIndex returns the position of NUMA node id in NUMANodes, or -1.
func (t *Topology) NUMANodeIndex(id int) int {
	if id < 0 || id >= len(t.numaIndex) {
		return -1
	}
	return t.numaIndex[id]
}

// Socket returns the socket with the given physical package ID.
func (t *Topology) Socket(id int) (Socket, bool) {
	if id < 0 || id >= len(t.socketIndex) || t.socketIndex[id] < 0 {
		return Socket{}, false
	}
	return t.Sockets[t.socketIndex[id]], true
}

// CPUsOfNUMANode returns the online CPUs of a NUMA node (empty for unknown or memory-only nodes).
func (t *Topology) CPUsOfNUMANode(id int) cpuset.CPUSet {
	n, ok := t.NUMANode(id)
	if !ok {
		return cpuset.New()
	}
	return n.CPUs
}

// NUMANodeOfCPU returns the NUMA node ID of an online CPU, or -1.
func (t *Topology) NUMANodeOfCPU(cpu int) int {
	c, ok := t.CPU(cpu)
	if !ok {
		return -1
	}
	return c.NUMANode
}

// Siblings returns the hardware threads sharing a physical core with cpu, cpu included; empty
// when cpu is not online.
func (t *Topology) Siblings(cpu int) cpuset.CPUSet {
	c, ok := t.CPU(cpu)
	if !ok {
		return cpuset.New()
	}
	return t.Cores[c.Core].CPUs
}

// CoresOfNUMANode returns indices into Cores of the node's cores.
func (t *Topology) CoresOfNUMANode(id int) []int {
	n, ok := t.NUMANode(id)
	if !ok {
		return nil
	}
	return n.Cores
}

// CoresOfL3Group returns indices into Cores of the cores sharing L3 group g (an index into
// L3Groups).
func (t *Topology) CoresOfL3Group(g int) []int {
	if g < 0 || g >= len(t.L3Groups) {
		return nil
	}
	return t.L3Groups[g].Cores
}

// Distance returns the SLIT distance between two NUMA nodes given by kernel ID, or -1 when either
// is unknown.
func (t *Topology) Distance(from, to int) int {
	i, j := t.NUMANodeIndex(from), t.NUMANodeIndex(to)
	if i < 0 || j < 0 {
		return -1
	}
	return t.NUMANodes[i].Distances[j]
}

// ThreadsPerCore is the largest number of online threads on any core (1 without SMT).
func (t *Topology) ThreadsPerCore() int { return t.threadsPerCore }

// NumCPUs is the number of online CPUs.
func (t *Topology) NumCPUs() int { return t.OnlineCPUs.Size() }
