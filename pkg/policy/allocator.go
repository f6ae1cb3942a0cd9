package policy

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Config is the operator's part of the allocator's state.
type Config struct {
	// ReservedCPUs are kept for the kubelet and system daemons (the kubelet's --reserved-cpus);
	// they are never shared with pods nor handed out exclusively. They must be online.
	ReservedCPUs cpuset.CPUSet
	// MinSharedCPUs is the smallest size the shared pool may shrink to; at least 1, because the
	// containers that are not pinned must always have somewhere to run.
	MinSharedCPUs int
}

// Key names one pinned container: the pod's UID and the container's name within the pod.
type Key struct {
	PodUID    string
	Container string
}

func (k Key) String() string { return fmt.Sprintf("container %q of pod %s", k.Container, k.PodUID) }

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Container, b.Container))
}

// NUMAChoice is the NUMA node a request must use. The zero value lets the allocator choose.
type NUMAChoice struct {
	id  topology.NUMAID
	set bool
}

// OnNUMANode requires NUMA node id.
func OnNUMANode(id topology.NUMAID) NUMAChoice { return NUMAChoice{id: id, set: true} }

// Node returns the required node, and false when the allocator may choose.
func (c NUMAChoice) Node() (id topology.NUMAID, required bool) { return c.id, c.set }

// Request asks for exclusive CPUs for one container.
type Request struct {
	Key Key
	// CPUs is the number of logical CPUs: the container's integer CPU request (see CPUCount).
	CPUs int
	// NUMANode optionally names the node the placer chose.
	NUMANode NUMAChoice
	// AllowSplitCores lets the request share a physical core with another container when its
	// size is not a multiple of the threads per core, or when whole cores run out on the chosen
	// node. Without it, every CPU handed out belongs to a core held entirely by this request.
	AllowSplitCores bool
}

// Assignment is what one pinned container holds: the values for its cgroup's cpuset.cpus and
// cpuset.mems.
type Assignment struct {
	Key      Key
	CPUs     cpuset.CPUSet
	NUMANode topology.NUMAID
	// Mems is the single NUMA node the container's memory must come from ({NUMANode}).
	Mems cpuset.CPUSet
}

// Allocator decides which CPUs each pinned container holds.
//
// Pools. Every online CPU is in exactly one of:
//   - reserved: Config.ReservedCPUs, fixed when the allocator is built; only a new Config (via
//     Reconcile at start-up) changes it.
//   - exclusive: one entry per pinned container, added by Allocate or Restore and removed by
//     Release. An entry's CPUs lie in one NUMA node, which is also its Mems.
//   - shared: every other online CPU. It shrinks and grows as exclusive entries come and go;
//     SharedCPUs returns it after every change.
//
// Invariants, after every call (Verify checks them): the pools do not overlap; their union is
// the topology's online CPUs; the shared pool holds at least Config.MinSharedCPUs CPUs; every
// exclusive entry lies in one NUMA node. A call that would break one fails and changes nothing.
//
// Placement of a request of N CPUs: never across NUMA nodes. Whole physical cores first (SMT
// siblings together; a core missing an offline sibling counts as partly used), then, only when
// the request allows splitting cores, single threads of partly used cores, then threads of free
// cores. Among the NUMA nodes that can hold it: a partly used node before an empty one, then a
// node where the request fits in one L3 group, then the fullest node, then the lowest ID. Within
// the node: the partly used L3 group that can hold every core before an empty one, fullest
// first; a request larger than any group takes the groups with most free cores whole, then the
// best-fitting group for the rest.
//
// An Allocator is not safe for concurrent use; the node agent calls it under one mutex.
type Allocator struct {
	topo      *topology.Topology
	tpc       int
	reserved  cpuset.CPUSet
	minShared int

	// owner is indexed by CPU ID: ownerFree, ownerReserved, ownerAbsent or a slot index.
	owner       []int32
	cpuCore     []int
	coreCPUs    [][]int
	coreFree    []int
	coreCluster []int
	clusters    []cluster
	nodes       []nodeState // by position in topo.NUMANodes
	totalFree   int
	allocatable int

	slots     []slot
	freeSlots []int32
	byKey     map[Key]int32

	shared      cpuset.CPUSet
	sharedValid bool

	// Buffers reused across calls so bookkeeping does not allocate.
	scratch []int
	touched []int
	order   []int
}

// New builds an allocator with no exclusive entries for topo.
func New(topo *topology.Topology, cfg Config) (*Allocator, error) {
	if topo == nil {
		return nil, fmt.Errorf("build allocator: no topology")
	}
	if cfg.MinSharedCPUs < 1 {
		return nil, fmt.Errorf("build allocator: minimum shared pool of %d CPUs is too small; keep at least 1 CPU for containers that are not pinned", cfg.MinSharedCPUs)
	}
	if off := cfg.ReservedCPUs.Difference(topo.OnlineCPUs); !off.IsEmpty() {
		return nil, fmt.Errorf("build allocator: reserved CPUs %s are not online (online: %s); fix the reserved CPU list", off, topo.OnlineCPUs)
	}
	if left := topo.NumCPUs() - cfg.ReservedCPUs.Size(); left < cfg.MinSharedCPUs {
		return nil, fmt.Errorf("build allocator: %d online CPUs minus %d reserved leave %d, fewer than the shared pool's minimum of %d; reserve fewer CPUs or lower the minimum",
			topo.NumCPUs(), cfg.ReservedCPUs.Size(), left, cfg.MinSharedCPUs)
	}
	a := &Allocator{
		topo:      topo,
		tpc:       topo.ThreadsPerCore(),
		reserved:  cfg.ReservedCPUs.Clone(),
		minShared: cfg.MinSharedCPUs,
		byKey:     map[Key]int32{},
	}
	a.index()
	return a, nil
}

// Topology returns the topology the allocator places onto.
func (a *Allocator) Topology() *topology.Topology { return a.topo }

// ReservedCPUs returns the reserved pool.
func (a *Allocator) ReservedCPUs() cpuset.CPUSet { return a.reserved }

// MinSharedCPUs returns the smallest size the shared pool may shrink to.
func (a *Allocator) MinSharedCPUs() int { return a.minShared }

// SharedCPUs returns the shared pool: online CPUs neither reserved nor exclusively held.
func (a *Allocator) SharedCPUs() cpuset.CPUSet {
	if !a.sharedValid {
		ids := a.scratch[:0]
		for cpu, o := range a.owner {
			if o == ownerFree {
				ids = append(ids, cpu)
			}
		}
		a.shared = cpuset.New(ids...)
		a.scratch = ids[:0]
		a.sharedValid = true
	}
	return a.shared
}

// Allocate gives the request exclusive CPUs of one NUMA node, or returns one of the typed errors
// of this package (InvalidCountError, DuplicateError, UnknownNUMANodeError,
// MemoryOnlyNUMANodeError, SMTAlignmentError, TooLargeError, NoFitError) and changes nothing.
func (a *Allocator) Allocate(req Request) (Assignment, error) {
	if s, ok := a.byKey[req.Key]; ok {
		return Assignment{}, &DuplicateError{Key: req.Key, CPUs: a.slots[s].set}
	}
	ni, err := a.place(req)
	if err != nil {
		return Assignment{}, err
	}
	s := a.newSlot(req.Key, ni)
	a.pick(s, ni, req.CPUs, a.splits(req))
	return a.commit(s), nil
}

// WouldFit answers whether Allocate would admit the request now, without changing anything: it
// returns the NUMA node Allocate would use, or the error it would return. It does not check
// whether the container already holds CPUs.
func (a *Allocator) WouldFit(req Request) (numaNode topology.NUMAID, err error) {
	ni, err := a.place(req)
	if err != nil {
		return -1, err
	}
	return a.topo.NUMANodes[ni].ID, nil
}

// Release returns a container's exclusive CPUs to the shared pool. It reports false, changing
// nothing, when the container holds none.
func (a *Allocator) Release(key Key) (Assignment, bool) {
	s, ok := a.byKey[key]
	if !ok {
		return Assignment{}, false
	}
	asg := a.assignment(s)
	for _, cpu := range a.slots[s].cpus {
		a.give(cpu)
	}
	delete(a.byKey, key)
	a.slots[s] = slot{cpus: a.slots[s].cpus[:0]}
	a.freeSlots = append(a.freeSlots, s)
	a.sharedValid = false
	return asg, true
}

// Restore re-adds an assignment made earlier (read back from a checkpoint or a cgroup after a
// restart). It need not be whole cores, but it must name online CPUs of one NUMA node that are
// neither reserved nor held by another container, and leave the shared pool its minimum;
// otherwise it returns a *RestoreError (or *DuplicateError) and changes nothing.
func (a *Allocator) Restore(asg Assignment) error {
	if s, ok := a.byKey[asg.Key]; ok {
		return &DuplicateError{Key: asg.Key, CPUs: a.slots[s].set}
	}
	fail := func(reason RepairReason, format string, args ...any) error {
		return &RestoreError{Key: asg.Key, CPUs: asg.CPUs, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	ni := a.topo.NUMANodeIndex(asg.NUMANode)
	if ni < 0 || a.nodes[ni].capacity == 0 {
		return fail(ReasonInvalidAssignment, "NUMA node %d does not exist or has no CPUs", asg.NUMANode)
	}
	if !asg.Mems.IsEmpty() && !asg.Mems.Equals(a.nodes[ni].mems) {
		return fail(ReasonInvalidAssignment, "memory nodes %s are not its NUMA node %d", asg.Mems, asg.NUMANode)
	}
	if asg.CPUs.IsEmpty() {
		return fail(ReasonInvalidAssignment, "the CPU set is empty")
	}
	cpus := asg.CPUs.List()
	for _, cpu := range cpus {
		switch o := a.ownerOf(cpu); {
		case o == ownerAbsent:
			return fail(ReasonCPUOffline, "CPU %d is not online", cpu)
		case o == ownerReserved:
			return fail(ReasonReservedOverlap, "CPU %d is reserved (%s)", cpu, a.reserved)
		case o >= 0:
			return fail(ReasonOverlap, "CPU %d is held by %s", cpu, a.slots[o].key)
		case a.topo.NUMANodeOfCPU(cpu) != asg.NUMANode:
			return fail(ReasonInvalidAssignment, "CPU %d is on NUMA node %d, not %d", cpu, a.topo.NUMANodeOfCPU(cpu), asg.NUMANode)
		}
	}
	if a.totalFree-len(cpus) < a.minShared {
		return fail(ReasonSharedMinimum, "the shared pool would shrink from %d to %d CPUs, below its minimum of %d", a.totalFree, a.totalFree-len(cpus), a.minShared)
	}
	s := a.newSlot(asg.Key, ni)
	for _, cpu := range cpus {
		a.take(s, cpu)
	}
	a.commit(s)
	return nil
}

// Lookup returns the CPUs a container holds.
func (a *Allocator) Lookup(key Key) (Assignment, bool) {
	s, ok := a.byKey[key]
	if !ok {
		return Assignment{}, false
	}
	return a.assignment(s), true
}

// Assignments returns every exclusive entry, ordered by pod UID then container name.
func (a *Allocator) Assignments() []Assignment {
	out := make([]Assignment, 0, len(a.byKey))
	for _, s := range a.byKey {
		out = append(out, a.assignment(s))
	}
	slices.SortFunc(out, func(x, y Assignment) int { return compareKeys(x.Key, y.Key) })
	return out
}

// Len returns the number of exclusive entries.
func (a *Allocator) Len() int { return len(a.byKey) }

func (a *Allocator) splits(req Request) bool { return req.AllowSplitCores || a.tpc == 1 }

func (a *Allocator) assignment(s int32) Assignment {
	sl := &a.slots[s]
	return Assignment{Key: sl.key, CPUs: sl.set, NUMANode: a.topo.NUMANodes[sl.node].ID, Mems: a.nodes[sl.node].mems}
}
