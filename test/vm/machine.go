package vm

import (
	"fmt"
	"strconv"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Machine is the virtual hardware of one configuration: a regular grid of sockets × cores ×
// threads carved into NUMA nodes. CPUs are numbered the way qemu numbers them: CPU i is thread
// i%ThreadsPerCore of core (i/ThreadsPerCore)%CoresPerSocket of socket
// i/(CoresPerSocket*ThreadsPerCore), so SMT siblings are adjacent ("0-1").
type Machine struct {
	Sockets        int `json:"sockets"`
	CoresPerSocket int `json:"coresPerSocket"`
	ThreadsPerCore int `json:"threadsPerCore"`
	// Nodes are the NUMA nodes; node i has kernel ID i. A node without CPUs is memory-only.
	Nodes []Node `json:"nodes"`
	// Distances is the SLIT table (Distances[i][j] from node i to node j); nil leaves qemu's
	// default of 10 local and 20 remote.
	Distances [][]int `json:"distances,omitempty"`
	// MaxCPUs boots only CPUs 0..MaxCPUs-1 (kernel maxcpus=); the others are present but offline.
	// Zero brings every CPU online.
	MaxCPUs int `json:"maxCPUs,omitempty"`
}

// Node is one NUMA node of a Machine.
type Node struct {
	// CPUs in kernel list format ("0-3"); empty for a memory-only node.
	CPUs string `json:"cpus,omitempty"`
	// MemoryMiB is the node's RAM as qemu gives it; the guest kernel reports somewhat less.
	MemoryMiB int `json:"memoryMiB"`
}

// NumCPUs is the number of CPUs qemu creates, online or not.
func (m Machine) NumCPUs() int { return m.Sockets * m.CoresPerSocket * m.ThreadsPerCore }

// MemoryMiB is the guest's total RAM.
func (m Machine) MemoryMiB() int {
	total := 0
	for _, n := range m.Nodes {
		total += n.MemoryMiB
	}
	return total
}

// Online is the set of CPUs the guest kernel brings up.
func (m Machine) Online() cpuset.CPUSet {
	n := m.NumCPUs()
	if m.MaxCPUs > 0 && m.MaxCPUs < n {
		n = m.MaxCPUs
	}
	return cpuRange(0, n)
}

// Offline is the set of CPUs that are present but left offline by MaxCPUs.
func (m Machine) Offline() cpuset.CPUSet {
	return cpuRange(0, m.NumCPUs()).Difference(m.Online())
}

// SocketOf returns the socket (physical package) of a CPU.
func (m Machine) SocketOf(cpu int) int { return cpu / (m.CoresPerSocket * m.ThreadsPerCore) }

// CoreIDOf returns the kernel's core_id of a CPU: its core's position within the socket.
func (m Machine) CoreIDOf(cpu int) int { return (cpu / m.ThreadsPerCore) % m.CoresPerSocket }

// SocketCPUs returns the online CPUs of a socket.
func (m Machine) SocketCPUs(socket int) cpuset.CPUSet {
	per := m.CoresPerSocket * m.ThreadsPerCore
	return cpuRange(socket*per, (socket+1)*per).Intersection(m.Online())
}

// Cores returns the online threads of every core that has at least one online thread, in core
// order.
func (m Machine) Cores() []cpuset.CPUSet {
	var cores []cpuset.CPUSet
	for first := 0; first < m.NumCPUs(); first += m.ThreadsPerCore {
		threads := cpuRange(first, first+m.ThreadsPerCore).Intersection(m.Online())
		if !threads.IsEmpty() {
			cores = append(cores, threads)
		}
	}
	return cores
}

// NodeCPUs returns the online CPUs of NUMA node id (empty for a memory-only node).
func (m Machine) NodeCPUs(id int) cpuset.CPUSet {
	set, err := cpulist.Parse(m.Nodes[id].CPUs)
	if err != nil {
		return cpuset.New()
	}
	return set.Intersection(m.Online())
}

// Distance returns the SLIT distance from node i to node j as the guest should report it.
func (m Machine) Distance(i, j int) int {
	if m.Distances != nil {
		return m.Distances[i][j]
	}
	if i == j {
		return 10
	}
	return 20
}

// Validate checks that the machine is one qemu can build and the tests can reason about: every
// CPU in exactly one node, a core's threads in one node, a square symmetric distance table.
func (m Machine) Validate() error {
	if m.Sockets < 1 || m.CoresPerSocket < 1 || m.ThreadsPerCore < 1 {
		return fmt.Errorf("sockets, cores per socket and threads per core must be at least 1, got %d×%d×%d",
			m.Sockets, m.CoresPerSocket, m.ThreadsPerCore)
	}
	if len(m.Nodes) == 0 {
		return fmt.Errorf("no NUMA nodes: give at least one node holding every CPU")
	}
	if m.MaxCPUs < 0 || m.MaxCPUs > m.NumCPUs() {
		return fmt.Errorf("maxCPUs %d is outside 0..%d", m.MaxCPUs, m.NumCPUs())
	}
	all := cpuRange(0, m.NumCPUs())
	seen := cpuset.New()
	for id, n := range m.Nodes {
		set, err := cpulist.Parse(n.CPUs)
		if err != nil {
			return fmt.Errorf("NUMA node %d: CPU list %q: %w", id, n.CPUs, err)
		}
		if !set.IsSubsetOf(all) {
			return fmt.Errorf("NUMA node %d: CPUs %s do not exist (the machine has %s)", id, set.Difference(all), all)
		}
		if both := set.Intersection(seen); !both.IsEmpty() {
			return fmt.Errorf("NUMA node %d: CPUs %s are already in another node", id, both)
		}
		for _, cpu := range set.List() {
			first := cpu - cpu%m.ThreadsPerCore
			if core := cpuRange(first, first+m.ThreadsPerCore); !core.IsSubsetOf(set) {
				return fmt.Errorf("NUMA node %d holds CPU %d but not all of its core's threads %s", id, cpu, core)
			}
		}
		if n.MemoryMiB < 64 {
			return fmt.Errorf("NUMA node %d has %d MiB of memory, want at least 64", id, n.MemoryMiB)
		}
		seen = seen.Union(set)
	}
	if missing := all.Difference(seen); !missing.IsEmpty() {
		return fmt.Errorf("CPUs %s are in no NUMA node", missing)
	}
	return m.validateDistances()
}

func (m Machine) validateDistances() error {
	if m.Distances == nil {
		return nil
	}
	if len(m.Distances) != len(m.Nodes) {
		return fmt.Errorf("distance table has %d rows, want one per NUMA node (%d)", len(m.Distances), len(m.Nodes))
	}
	for i, row := range m.Distances {
		if len(row) != len(m.Nodes) {
			return fmt.Errorf("distance row of node %d has %d entries, want %d", i, len(row), len(m.Nodes))
		}
		for j, d := range row {
			switch {
			case i == j && d != 10:
				return fmt.Errorf("distance from node %d to itself is %d, want 10", i, d)
			case i != j && (d <= 10 || d > 254):
				return fmt.Errorf("distance from node %d to node %d is %d, want 11..254", i, j, d)
			case m.Distances[j][i] != d:
				return fmt.Errorf("distance table is not symmetric: node %d→%d is %d, %d→%d is %d", i, j, d, j, i, m.Distances[j][i])
			}
		}
	}
	return nil
}

// qemuArgs returns the qemu options that build this machine's CPUs, memory and NUMA nodes.
func (m Machine) qemuArgs() []string {
	n := m.NumCPUs()
	args := []string{
		"-m", strconv.Itoa(m.MemoryMiB()) + "M",
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", n, m.Sockets, m.CoresPerSocket, m.ThreadsPerCore),
	}
	for id, node := range m.Nodes {
		args = append(args, "-object", fmt.Sprintf("memory-backend-ram,id=mem%d,size=%dM", id, node.MemoryMiB))
		spec := fmt.Sprintf("node,nodeid=%d,memdev=mem%d", id, id)
		set, _ := cpulist.Parse(node.CPUs) // checked by Validate
		for _, r := range ranges(set) {
			spec += ",cpus=" + r
		}
		args = append(args, "-numa", spec)
	}
	if m.Distances != nil {
		for i := range m.Nodes {
			for j := i + 1; j < len(m.Nodes); j++ {
				args = append(args, "-numa", fmt.Sprintf("dist,src=%d,dst=%d,val=%d", i, j, m.Distances[i][j]))
			}
		}
	}
	return args
}

// ranges splits a set into qemu's "a-b" / "a" range syntax, one entry per contiguous run.
func ranges(s cpuset.CPUSet) []string {
	var out []string
	list := s.List()
	for i := 0; i < len(list); {
		j := i
		for j+1 < len(list) && list[j+1] == list[j]+1 {
			j++
		}
		if i == j {
			out = append(out, strconv.Itoa(list[i]))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", list[i], list[j]))
		}
		i = j + 1
	}
	return out
}

func cpuRange(from, to int) cpuset.CPUSet {
	ids := make([]int, 0, max(0, to-from))
	for i := from; i < to; i++ {
		ids = append(ids, i)
	}
	return cpuset.New(ids...)
}
