package topology

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/utils/cpuset"
)

// Spec is the raw description a Topology is built from: what Discover reads from sysfs, and what
// tests write as literals.
type Spec struct {
	// CPUs lists every online CPU.
	CPUs []CPUSpec
	// Offline are present or possible CPUs that are offline.
	Offline cpuset.CPUSet
	// Isolated are online CPUs isolated from load balancing.
	Isolated cpuset.CPUSet
	// NUMANodes lists every NUMA node, including memory-only nodes. Each node's Distances row is
	// given in ascending node-ID order over all listed nodes.
	NUMANodes []NUMANodeSpec
	// L3SizeBytes optionally gives the size of the L3 cache with a given CPUSpec.L3 key.
	L3SizeBytes map[int]uint64
}

// CPUSpec places one online CPU.
type CPUSpec struct {
	ID     int
	Socket SocketID
	// Die is the die within the socket (die_id); 0 where the kernel has no dies.
	Die int
	// KernelCoreID is the kernel core_id; threads with equal (Socket, Die, KernelCoreID) share a
	// core.
	KernelCoreID int
	NUMANode     NUMAID
	// L3 is a key shared by the CPUs of one L3 cache, or -1 when the CPU reports none.
	L3 int
}

// NUMANodeSpec describes one NUMA node.
type NUMANodeSpec struct {
	ID          NUMAID
	MemoryBytes uint64
	Distances   []int
}

// New builds a Topology from a Spec, checking that the description is consistent. Errors name the
// CPU or node at fault.
func New(spec Spec) (*Topology, error) {
	if len(spec.CPUs) == 0 {
		return nil, fmt.Errorf("topology has no online CPUs")
	}
	if len(spec.NUMANodes) == 0 {
		return nil, fmt.Errorf("topology has no NUMA nodes")
	}
	cpus := slices.Clone(spec.CPUs)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].ID < cpus[j].ID })
	nodes := slices.Clone(spec.NUMANodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })

	t := &Topology{}
	if err := t.indexNUMANodes(nodes); err != nil {
		return nil, err
	}
	if err := t.indexCPUs(cpus); err != nil {
		return nil, err
	}
	if !spec.Offline.Intersection(t.OnlineCPUs).IsEmpty() {
		return nil, fmt.Errorf("CPUs %s are listed both online and offline", spec.Offline.Intersection(t.OnlineCPUs))
	}
	if !spec.Isolated.IsSubsetOf(t.OnlineCPUs) {
		return nil, fmt.Errorf("isolated CPUs %s are not online", spec.Isolated.Difference(t.OnlineCPUs))
	}
	t.OfflineCPUs = spec.Offline.Clone()
	t.IsolatedCPUs = spec.Isolated.Clone()

	if err := t.buildCores(cpus); err != nil {
		return nil, err
	}
	t.buildSockets(cpus)
	t.buildNUMANodes(nodes)
	t.buildL3Groups(cpus, spec.L3SizeBytes)
	return t, nil
}

func (t *Topology) indexNUMANodes(nodes []NUMANodeSpec) error {
	maxID := nodes[len(nodes)-1].ID
	if nodes[0].ID < 0 {
		return fmt.Errorf("NUMA node ID %d is negative", nodes[0].ID)
	}
	t.numaIndex = filled(int(maxID)+1, -1)
	for i, n := range nodes {
		if t.numaIndex[n.ID] >= 0 {
			return fmt.Errorf("NUMA node %d is listed twice", n.ID)
		}
		t.numaIndex[n.ID] = i
		if len(n.Distances) != len(nodes) {
			return fmt.Errorf("NUMA node %d has %d distances, want one per node (%d)", n.ID, len(n.Distances), len(nodes))
		}
		for j, d := range n.Distances {
			if d <= 0 {
				return fmt.Errorf("NUMA node %d has distance %d to node %d, want a positive number", n.ID, d, nodes[j].ID)
			}
		}
	}
	return nil
}

func (t *Topology) indexCPUs(cpus []CPUSpec) error {
	maxCPU := cpus[len(cpus)-1].ID
	if cpus[0].ID < 0 {
		return fmt.Errorf("CPU ID %d is negative", cpus[0].ID)
	}
	t.cpus = make([]CPU, maxCPU+1)
	maxSocket := SocketID(0)
	online := make([]int, 0, len(cpus))
	for i, c := range cpus {
		if i > 0 && cpus[i-1].ID == c.ID {
			return fmt.Errorf("CPU %d is listed twice", c.ID)
		}
		if c.Socket < 0 {
			return fmt.Errorf("CPU %d has negative socket %d", c.ID, c.Socket)
		}
		if t.NUMANodeIndex(c.NUMANode) < 0 {
			return fmt.Errorf("CPU %d is on NUMA node %d, which is not in the node list", c.ID, c.NUMANode)
		}
		maxSocket = max(maxSocket, c.Socket)
		t.cpus[c.ID] = CPU{ID: c.ID, Online: true, Socket: c.Socket, NUMANode: c.NUMANode, Core: -1, L3Group: NoL3}
		online = append(online, c.ID)
	}
	t.OnlineCPUs = cpuset.New(online...)
	t.socketIndex = filled(int(maxSocket)+1, -1)
	return nil
}

type coreKey struct {
	socket      SocketID
	die, coreID int
}

// buildCores groups threads into cores, numbering cores by their lowest CPU.
func (t *Topology) buildCores(cpus []CPUSpec) error {
	byKey := map[coreKey]CoreID{}
	threads := [][]int{}
	for _, c := range cpus { // ascending CPU order, so cores come out ordered by lowest CPU
		k := coreKey{c.Socket, c.Die, c.KernelCoreID}
		id, ok := byKey[k]
		if !ok {
			id = CoreID(len(threads))
			byKey[k] = id
			threads = append(threads, nil)
			t.Cores = append(t.Cores, Core{ID: id, KernelCoreID: c.KernelCoreID, Die: c.Die, Socket: c.Socket, NUMANode: c.NUMANode, L3Group: NoL3})
		}
		if t.Cores[id].NUMANode != c.NUMANode {
			return fmt.Errorf("CPU %d (socket %d core %d) is on NUMA node %d but its sibling CPU %d is on node %d",
				c.ID, c.Socket, c.KernelCoreID, c.NUMANode, threads[id][0], t.Cores[id].NUMANode)
		}
		threads[id] = append(threads[id], c.ID)
		t.cpus[c.ID].Core = id
	}
	for i := range t.Cores {
		t.Cores[i].CPUs = cpuset.New(threads[i]...)
		t.threadsPerCore = max(t.threadsPerCore, len(threads[i]))
	}
	return nil
}

func (t *Topology) buildSockets(cpus []CPUSpec) {
	ids := []SocketID{}
	members := map[SocketID][]int{}
	for _, c := range cpus {
		if _, ok := members[c.Socket]; !ok {
			ids = append(ids, c.Socket)
		}
		members[c.Socket] = append(members[c.Socket], c.ID)
	}
	slices.Sort(ids)
	for i, id := range ids {
		t.socketIndex[id] = i
		s := Socket{ID: id, CPUs: cpuset.New(members[id]...)}
		for _, core := range t.Cores {
			if core.Socket == id {
				s.Cores = append(s.Cores, core.ID)
				if !slices.Contains(s.NUMANodes, core.NUMANode) {
					s.NUMANodes = append(s.NUMANodes, core.NUMANode)
				}
			}
		}
		slices.Sort(s.NUMANodes)
		t.Sockets = append(t.Sockets, s)
	}
}

func (t *Topology) buildNUMANodes(nodes []NUMANodeSpec) {
	for _, n := range nodes {
		node := NUMANode{ID: n.ID, MemoryBytes: n.MemoryBytes, distances: slices.Clone(n.Distances)}
		members := []int{}
		for _, core := range t.Cores {
			if core.NUMANode == n.ID {
				node.Cores = append(node.Cores, core.ID)
				members = append(members, core.CPUs.List()...)
			}
		}
		node.CPUs = cpuset.New(members...)
		t.NUMANodes = append(t.NUMANodes, node)
	}
}

// buildL3Groups groups CPUs by L3 key, numbering groups by their lowest CPU.
func (t *Topology) buildL3Groups(cpus []CPUSpec, sizes map[int]uint64) {
	byKey := map[int]L3ID{}
	members := [][]int{}
	for _, c := range cpus {
		if c.L3 < 0 {
			continue
		}
		id, ok := byKey[c.L3]
		if !ok {
			id = L3ID(len(members))
			byKey[c.L3] = id
			members = append(members, nil)
			t.L3Groups = append(t.L3Groups, L3Group{ID: id, NUMANode: c.NUMANode, SizeBytes: sizes[c.L3]})
		}
		if t.L3Groups[id].NUMANode != c.NUMANode {
			t.L3Groups[id].NUMANode = NoNUMA
		}
		members[id] = append(members[id], c.ID)
		t.cpus[c.ID].L3Group = id
	}
	for i := range t.L3Groups {
		t.L3Groups[i].CPUs = cpuset.New(members[i]...)
	}
	for ci := range t.Cores {
		core := &t.Cores[ci]
		first := core.CPUs.List()[0]
		core.L3Group = t.cpus[first].L3Group
		if core.L3Group >= 0 {
			g := &t.L3Groups[core.L3Group]
			g.Cores = append(g.Cores, core.ID)
		}
	}
	for _, g := range t.L3Groups {
		if g.NUMANode == NoNUMA {
			continue
		}
		n := &t.NUMANodes[t.NUMANodeIndex(g.NUMANode)]
		n.L3Groups = append(n.L3Groups, g.ID)
	}
}

func filled(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
