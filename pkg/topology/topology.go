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

// Cross-references: every part of a Topology names another part by its ID, never by its position
// in a slice, and every kind of ID has a type of its own, so that a socket's ID passed where a
// NUMA node's is wanted, or a plain int (a loop position, a count) passed as an ID, does not
// compile.
//   - NUMAID and SocketID are the kernel's numbers (nodeN in sysfs, physical_package_id). They may
//     have gaps and need not start at 0, so a NUMA node or socket is found by ID with NUMANode or
//     Socket; NUMANodes and Sockets are for iterating, never for indexing with an ID.
//   - CoreID and L3ID are machine-wide logical numbers (lscpu's CORE and L3 columns), dense from 0
//     by lowest CPU, so Cores[id] and L3Groups[id] are the core and group with that ID.
//   - CPUs are plain ints, as in cpuset.
type (
	NUMAID   int
	SocketID int
	CoreID   int
	L3ID     int
)

// NoL3 is the L3Group of a core or CPU on a host that reports no L3 cache; NoNUMA the NUMANode
// of an L3 group whose CPUs lie in several NUMA nodes.
const (
	NoL3   L3ID   = -1
	NoNUMA NUMAID = -1
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
	// socketIndex maps a socket ID to its position in Sockets (-1 when absent).
	socketIndex    []int
	threadsPerCore int
}

// Socket is one physical package.
type Socket struct {
	ID   SocketID
	CPUs cpuset.CPUSet
	// Cores are the socket's cores, in core order.
	Cores []CoreID
	// NUMANodes are the NUMA nodes holding this socket's CPUs.
	NUMANodes []NUMAID
}

// NUMANode is one memory domain. A node without CPUs (CXL or HBM memory) has an empty CPUs set and
// no cores.
type NUMANode struct {
	ID   NUMAID
	CPUs cpuset.CPUSet
	// MemoryBytes is the node's total memory (MemTotal of its meminfo).
	MemoryBytes uint64
	// Cores are the node's cores, in core order.
	Cores []CoreID
	// L3Groups are the L3 groups whose CPUs lie in this node.
	L3Groups []L3ID

	// distances is the node's row of the SLIT distance table, in NUMANodes order (Distance).
	distances []int
}

// Core is one physical core with its hardware threads.
type Core struct {
	ID CoreID
	// KernelCoreID is the kernel's core_id, which is only unique within a socket (and die) and
	// may have gaps: a value, not a reference.
	KernelCoreID int
	// Die is the kernel's die_id within the socket (0 where the kernel reports no dies).
	Die      int
	Socket   SocketID
	NUMANode NUMAID
	// L3Group is NoL3 when the host reports no L3 cache.
	L3Group L3ID
	// CPUs are the core's online hardware threads (its SMT siblings).
	CPUs cpuset.CPUSet
}

// L3Group is a set of cores sharing one last-level cache.
type L3Group struct {
	ID   L3ID
	CPUs cpuset.CPUSet
	// NUMANode is the node holding the group's CPUs, or NoNUMA when the group spans several.
	NUMANode NUMAID
	// Cores are the group's cores, in core order.
	Cores []CoreID
	// SizeBytes is the cache size when sysfs reports it, else 0.
	SizeBytes uint64
}

// CPU is where one logical CPU sits in the topology.
type CPU struct {
	ID       int
	Online   bool
	Socket   SocketID
	NUMANode NUMAID
	Core     CoreID
	// L3Group is NoL3 when the host reports no L3 cache.
	L3Group L3ID
}

// CPU returns the placement of one logical CPU; ok is false for a CPU that is not online.
func (t *Topology) CPU(id int) (cpu CPU, ok bool) {
	if id < 0 || id >= len(t.cpus) || !t.cpus[id].Online {
		return CPU{}, false
	}
	return t.cpus[id], true
}

// NUMANode returns the NUMA node with the given ID.
func (t *Topology) NUMANode(id NUMAID) (NUMANode, bool) {
	if i := t.NUMANodeIndex(id); i >= 0 {
		return t.NUMANodes[i], true
	}
	return NUMANode{}, false
}

// NUMANodeIndex returns the position of NUMA node id in NUMANodes, or -1: for a caller that keeps
// a slice parallel to NUMANodes. No part of a Topology refers to another by position.
func (t *Topology) NUMANodeIndex(id NUMAID) int {
	if id < 0 || int(id) >= len(t.numaIndex) {
		return -1
	}
	return t.numaIndex[id]
}

// Socket returns the socket with the given ID.
func (t *Topology) Socket(id SocketID) (Socket, bool) {
	if id < 0 || int(id) >= len(t.socketIndex) || t.socketIndex[id] < 0 {
		return Socket{}, false
	}
	return t.Sockets[t.socketIndex[id]], true
}

// CPUsOfNUMANode returns the online CPUs of a NUMA node (empty for unknown or memory-only nodes).
func (t *Topology) CPUsOfNUMANode(id NUMAID) cpuset.CPUSet {
	n, ok := t.NUMANode(id)
	if !ok {
		return cpuset.New()
	}
	return n.CPUs
}

// NUMANodeOfCPU returns the NUMA node of an online CPU, or NoNUMA.
func (t *Topology) NUMANodeOfCPU(cpu int) NUMAID {
	c, ok := t.CPU(cpu)
	if !ok {
		return NoNUMA
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

// CoresOfNUMANode returns the node's cores.
func (t *Topology) CoresOfNUMANode(id NUMAID) []CoreID {
	n, ok := t.NUMANode(id)
	if !ok {
		return nil
	}
	return n.Cores
}

// CoresOfL3Group returns the cores sharing L3 group g.
func (t *Topology) CoresOfL3Group(g L3ID) []CoreID {
	if g < 0 || int(g) >= len(t.L3Groups) {
		return nil
	}
	return t.L3Groups[g].Cores
}

// Distance returns the SLIT distance between two NUMA nodes, or -1 when either is unknown.
func (t *Topology) Distance(from, to NUMAID) int {
	i, j := t.NUMANodeIndex(from), t.NUMANodeIndex(to)
	if i < 0 || j < 0 {
		return -1
	}
	return t.NUMANodes[i].distances[j]
}

// ThreadsPerCore is the largest number of online threads on any core (1 without SMT).
func (t *Topology) ThreadsPerCore() int { return t.threadsPerCore }

// NumCPUs is the number of online CPUs.
func (t *Topology) NumCPUs() int { return t.OnlineCPUs.Size() }
