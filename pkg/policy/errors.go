package policy

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// InvalidCountError reports a request for zero or a negative number of CPUs.
type InvalidCountError struct {
	Key       Key
	Requested int
}

func (e *InvalidCountError) Error() string {
	return fmt.Sprintf("exclusive CPU request of %s asks for %d CPUs; ask for a positive whole number", e.Key, e.Requested)
}

// TooLargeError reports a request that can never fit: it is larger than the allocatable CPUs of
// the required NUMA node, or of every NUMA node, or than what the node can give without shrinking
// the shared pool below its minimum. Waiting does not help; the request must shrink or go to a
// node with larger NUMA nodes.
type TooLargeError struct {
	Key       Key
	Requested int
	// NUMANode is the required node, or -1 when the allocator could choose.
	NUMANode topology.NUMAID
	// Limit is the most CPUs any request of this kind could ever get there.
	Limit int
	// NodeCPUs is the number of online CPUs of the whole machine.
	NodeCPUs int
}

func (e *TooLargeError) Error() string {
	where := "any single NUMA node of this machine"
	if e.NUMANode >= 0 {
		where = fmt.Sprintf("NUMA node %d", e.NUMANode)
	}
	return fmt.Sprintf("exclusive CPU request of %s for %d CPUs can never fit: %s can give at most %d (the machine has %d online CPUs); lower the request or place it on a node with larger NUMA nodes",
		e.Key, e.Requested, where, e.Limit, e.NodeCPUs)
}

// UnknownNUMANodeError reports a request for a NUMA node this machine does not have.
type UnknownNUMANodeError struct {
	Key      Key
	NUMANode topology.NUMAID
	// Known are the machine's NUMA node IDs that have CPUs.
	Known []topology.NUMAID
}

func (e *UnknownNUMANodeError) Error() string {
	return fmt.Sprintf("exclusive CPU request of %s names NUMA node %d, which this machine does not have (nodes with CPUs: %v); the placement is stale or meant for another node",
		e.Key, e.NUMANode, e.Known)
}

// MemoryOnlyNUMANodeError reports a request for a NUMA node that has memory but no CPUs (CXL or
// HBM memory).
type MemoryOnlyNUMANodeError struct {
	Key      Key
	NUMANode topology.NUMAID
}

func (e *MemoryOnlyNUMANodeError) Error() string {
	return fmt.Sprintf("exclusive CPU request of %s names NUMA node %d, which has memory but no CPUs; name a node with CPUs", e.Key, e.NUMANode)
}

// SMTAlignmentError reports a request that would have to share a physical core with another
// container (its size is not a multiple of the threads per core) while the caller did not allow
// splitting cores.
type SMTAlignmentError struct {
	Key         Key
	Requested   int
	CPUsPerCore int
}

func (e *SMTAlignmentError) Error() string {
	return fmt.Sprintf("exclusive CPU request of %s for %d CPUs is not a multiple of the %d hardware threads per core; request a multiple of %d or allow splitting cores",
		e.Key, e.Requested, e.CPUsPerCore, e.CPUsPerCore)
}

// NUMAFree is the capacity and free CPUs of one NUMA node: a zone of the published free-core
// map, and the detail of a NoFitError.
type NUMAFree struct {
	NUMANode topology.NUMAID
	// Capacity counts the node's online CPUs; Allocatable those that are not reserved.
	Capacity, Allocatable int
	// FreeCPUs are the node's CPUs in the shared pool (neither reserved nor exclusively held).
	FreeCPUs cpuset.CPUSet
	// FreeWholeCores counts the node's physical cores whose every hardware thread is free.
	FreeWholeCores int
	// Available is the most CPUs one request that may split cores could get here now (the shared
	// pool's minimum taken into account); AvailableAligned the most CPUs, in whole cores, one
	// request that may not split cores could get here now.
	Available, AvailableAligned int
}

// NoFitError reports a request that no single NUMA node can hold right now. The allocator never
// spills a request across NUMA nodes; the request may fit later, when pinned containers finish.
type NoFitError struct {
	Key       Key
	Requested int
	// NUMANode is the required node, or -1 when any node would have done.
	NUMANode topology.NUMAID
	// WholeCores is true when the request needed whole physical cores.
	WholeCores bool
	// Free lists every NUMA node with CPUs, in node order.
	Free []NUMAFree
	// SharedLimited is true when a NUMA node had room but taking it would have shrunk the shared
	// pool (SharedFree CPUs) below its minimum (SharedMinimum CPUs).
	SharedLimited             bool
	SharedFree, SharedMinimum int
}

func (e *NoFitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exclusive CPU request of %s for %d CPUs does not fit now: ", e.Key, e.Requested)
	unit := "free CPUs"
	if e.WholeCores {
		unit = "CPUs in free whole cores"
	}
	switch {
	case e.SharedLimited:
		fmt.Fprintf(&b, "it would shrink the shared pool from %d CPUs below its minimum of %d", e.SharedFree, e.SharedMinimum)
	case e.NUMANode >= 0:
		fmt.Fprintf(&b, "NUMA node %d does not have %d %s", e.NUMANode, e.Requested, unit)
	default:
		fmt.Fprintf(&b, "no single NUMA node has %d %s", e.Requested, unit)
	}
	b.WriteString("; free now:")
	for i, f := range e.Free {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " node %d: %d free CPUs [%s], %d whole cores free", f.NUMANode, f.FreeCPUs.Size(), f.FreeCPUs, f.FreeWholeCores)
	}
	b.WriteString("; wait for pinned containers to finish or place the request on another node")
	return b.String()
}

// DuplicateError reports an allocation or restore for a container that already holds CPUs.
type DuplicateError struct {
	Key Key
	// CPUs are the CPUs the container already holds.
	CPUs cpuset.CPUSet
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s already holds exclusive CPUs %s; release them first", e.Key, e.CPUs)
}

// RestoreError reports an existing assignment that cannot be re-added as it stands.
type RestoreError struct {
	Key  Key
	CPUs cpuset.CPUSet
	// Reason is the repair reason the conflict maps to (Overlap, CPUOffline, ...).
	Reason RepairReason
	Detail string
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("cannot restore CPUs %s of %s: %s", e.CPUs, e.Key, e.Detail)
}
