package topology_test

import (
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/topology"
	"github.com/finegrain-dev/finegrain/test/vm"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

// These tests run inside the qemu guests of `make test-vm` (they skip elsewhere): Discover reads
// the real kernel's /sys and must find exactly the machine qemu was told to build.

func discoverGuest(t *testing.T) (vm.Machine, *topology.Topology) {
	t.Helper()
	m := vm.Guest(t).Machine
	topo, err := topology.Discover("/sys")
	if err != nil {
		t.Fatalf("Discover(/sys) in guest: %v", err)
	}
	var table strings.Builder
	if err := topology.WriteTable(&table, topo); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest topology:\n%s", table.String())
	return m, topo
}

func sets(s []cpuset.CPUSet) []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = c.String()
	}
	return out
}

func TestGuestDiscoverCPUs(t *testing.T) {
	m, topo := discoverGuest(t)
	got := map[string]string{
		"online":   topo.OnlineCPUs.String(),
		"offline":  topo.OfflineCPUs.String(),
		"isolated": topo.IsolatedCPUs.String(),
	}
	want := map[string]string{"online": m.Online().String(), "offline": m.Offline().String(), "isolated": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CPU lists (-qemu +discovered):\n%s", diff)
	}
	var cores []cpuset.CPUSet
	for _, c := range topo.Cores {
		cores = append(cores, c.CPUs)
		first := c.CPUs.List()[0]
		if int(c.Socket) != m.SocketOf(first) || c.KernelCoreID != m.CoreIDOf(first) {
			t.Errorf("core %d (CPUs %s): socket %d core_id %d, qemu placed it at socket %d core_id %d",
				c.ID, c.CPUs, c.Socket, c.KernelCoreID, m.SocketOf(first), m.CoreIDOf(first))
		}
		if !m.NodeCPUs(int(c.NUMANode)).Contains(first) {
			t.Errorf("core %d (CPUs %s) is on NUMA node %d, qemu put it elsewhere", c.ID, c.CPUs, c.NUMANode)
		}
	}
	if diff := cmp.Diff(sets(m.Cores()), sets(cores)); diff != "" {
		t.Errorf("cores' SMT threads (-qemu +discovered):\n%s", diff)
	}
	if got := topo.ThreadsPerCore(); got != m.ThreadsPerCore {
		t.Errorf("ThreadsPerCore = %d, want %d", got, m.ThreadsPerCore)
	}
	for _, core := range m.Cores() {
		for _, cpu := range core.List() {
			if got := topo.Siblings(cpu); !got.Equals(core) {
				t.Errorf("Siblings(%d) = %s, want %s", cpu, got, core)
			}
		}
	}
}

func TestGuestDiscoverSockets(t *testing.T) {
	m, topo := discoverGuest(t)
	if len(topo.Sockets) != m.Sockets {
		t.Fatalf("%d sockets discovered, qemu was given %d", len(topo.Sockets), m.Sockets)
	}
	for _, s := range topo.Sockets {
		if want := m.SocketCPUs(int(s.ID)); !s.CPUs.Equals(want) {
			t.Errorf("socket %d CPUs = %s, want %s", s.ID, s.CPUs, want)
		}
		var nodes []topology.NUMAID
		for id := range m.Nodes {
			if !m.NodeCPUs(id).Intersection(s.CPUs).IsEmpty() {
				nodes = append(nodes, topology.NUMAID(id))
			}
		}
		if diff := cmp.Diff(nodes, s.NUMANodes); diff != "" {
			t.Errorf("socket %d NUMA nodes (-qemu +discovered):\n%s", s.ID, diff)
		}
	}
}

func TestGuestDiscoverNUMA(t *testing.T) {
	m, topo := discoverGuest(t)
	if len(topo.NUMANodes) != len(m.Nodes) {
		t.Fatalf("%d NUMA nodes discovered, qemu was given %d", len(topo.NUMANodes), len(m.Nodes))
	}
	for i, n := range topo.NUMANodes {
		if int(n.ID) != i {
			t.Errorf("NUMA node at %d has ID %d, want %d", i, n.ID, i)
			continue
		}
		if want := m.NodeCPUs(i); !n.CPUs.Equals(want) {
			t.Errorf("node %d CPUs = %s, want %s", i, n.CPUs, want)
		}
		if m.Nodes[i].CPUs == "" && len(n.Cores) != 0 {
			t.Errorf("memory-only node %d has cores %v", i, n.Cores)
		}
		var dist []int
		for j := range m.Nodes {
			dist = append(dist, m.Distance(i, j))
		}
		if diff := cmp.Diff(dist, distances(topo, n)); diff != "" {
			t.Errorf("node %d distances (-qemu +discovered):\n%s", i, diff)
		}
		// The kernel keeps some of every node for itself; most of it must be reported.
		given := uint64(m.Nodes[i].MemoryMiB) << 20
		if n.MemoryBytes > given || n.MemoryBytes < given*8/10 {
			t.Errorf("node %d memory = %d bytes, qemu gave it %d", i, n.MemoryBytes, given)
		}
		for _, cpu := range n.CPUs.List() {
			if got := topo.NUMANodeOfCPU(cpu); int(got) != i {
				t.Errorf("NUMANodeOfCPU(%d) = %d, want %d", cpu, got, i)
			}
		}
	}
}

// TestGuestDiscoverL3 checks what qemu's emulated CPU reports about its last-level cache: groups,
// when present, partition the online CPUs and never split a core.
func TestGuestDiscoverL3(t *testing.T) {
	m, topo := discoverGuest(t)
	union := cpuset.New()
	for _, g := range topo.L3Groups {
		if !union.Intersection(g.CPUs).IsEmpty() {
			t.Errorf("L3 group %d (%s) overlaps another", g.ID, g.CPUs)
		}
		union = union.Union(g.CPUs)
		for _, ci := range g.Cores {
			if !topo.Cores[ci].CPUs.IsSubsetOf(g.CPUs) {
				t.Errorf("L3 group %d (%s) splits core %s", g.ID, g.CPUs, topo.Cores[ci].CPUs)
			}
		}
	}
	if len(topo.L3Groups) > 0 && !union.Equals(m.Online()) {
		t.Errorf("L3 groups cover %s, want every online CPU %s", union, m.Online())
	}
}

// distances is node n's row of the distance table, in NUMANodes order.
func distances(topo *topology.Topology, n topology.NUMANode) []int {
	var row []int
	for _, to := range topo.NUMANodes {
		row = append(row, topo.Distance(n.ID, to.ID))
	}
	return row
}
