package topology

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"
)

// WriteTable prints the topology the way lstopo nests it: socket → NUMA node (memory, distances)
// → L3 group → cores with their hardware threads, then memory-only NUMA nodes. A NUMA node that
// spans sockets appears under each socket with that socket's cores; an L3 group that spans NUMA
// nodes (sub-NUMA clustering) appears under each node with that node's cores.
func WriteTable(w io.Writer, t *Topology) error {
	bw := bufio.NewWriter(w)
	p := func(indent int, format string, args ...any) {
		bw.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(bw, format, args...)
		bw.WriteByte('\n')
	}
	p(0, "Machine: %d CPUs online (%s), %s, %s, %s, %s, %s",
		t.NumCPUs(), t.OnlineCPUs, plural(len(t.Sockets), "socket"), plural(len(t.NUMANodes), "NUMA node"),
		plural(len(t.Cores), "core"), plural(t.threadsPerCore, "thread")+" per core", plural(len(t.L3Groups), "L3 group"))
	p(1, "offline CPUs: %s", listOrNone(t.OfflineCPUs))
	p(1, "isolated CPUs: %s", listOrNone(t.IsolatedCPUs))
	showDie := slices.ContainsFunc(t.Cores, func(c Core) bool { return c.Die != 0 })
	for _, s := range t.Sockets {
		p(0, "Socket %d: CPUs %s", s.ID, s.CPUs)
		for _, nodeID := range s.NUMANodes {
			n, _ := t.NUMANode(nodeID)
			p(1, "NUMA node %d: CPUs %s, memory %s, distances %s", n.ID, n.CPUs, formatBytes(n.MemoryBytes), t.distanceRow(n))
			writeNodeCores(p, t, s.ID, n, showDie)
		}
	}
	for _, n := range t.NUMANodes {
		if n.CPUs.IsEmpty() {
			p(0, "NUMA node %d (memory only): memory %s, distances %s", n.ID, formatBytes(n.MemoryBytes), t.distanceRow(n))
		}
	}
	return bw.Flush()
}

// writeNodeCores prints the cores of one socket inside one NUMA node, grouped by L3 group.
func writeNodeCores(p func(int, string, ...any), t *Topology, socket SocketID, n NUMANode, showDie bool) {
	lastGroup := L3ID(-2)
	for _, id := range n.Cores {
		c := t.Cores[id]
		if c.Socket != socket {
			continue
		}
		indent := 2
		if c.L3Group != NoL3 {
			indent = 3
			if c.L3Group != lastGroup {
				g := t.L3Groups[c.L3Group]
				p(2, "L3 group %d (%s): CPUs %s", g.ID, formatBytes(g.SizeBytes), g.CPUs)
			}
		}
		lastGroup = c.L3Group
		die := ""
		if showDie {
			die = fmt.Sprintf(", die %d", c.Die)
		}
		p(indent, "core %d (core_id %d%s): CPUs %s", c.ID, c.KernelCoreID, die, c.CPUs)
	}
}

// distanceRow renders a node's distances as "node0=10 node1=21".
func (t *Topology) distanceRow(n NUMANode) string {
	var b strings.Builder
	for i, d := range n.distances {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "node%d=%d", t.NUMANodes[i].ID, d)
	}
	return b.String()
}

func listOrNone(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// formatBytes prints a size in binary units with one decimal ("62.8 GiB").
func formatBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(b), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", b)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
