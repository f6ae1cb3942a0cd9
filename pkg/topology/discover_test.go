package topology

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nodeWant is what a fixture's NUMA node must look like.
type nodeWant struct {
	ID          int
	CPUs        string
	MemoryBytes uint64
	Distances   []int
	L3Groups    []int
}

// fixtureWant is a fixture's expected topology, written from the machine's documentation
// (testdata/README.md), not from running Discover.
type fixtureWant struct {
	name                        string
	online, offline, isolated   string
	sockets                     []string
	nodes                       []nodeWant
	cores, threadsPerCore       int
	l3Groups                    []string
	l3SizeBytes                 uint64
	siblings                    map[int]string
	coreIDs                     map[int]int
	socketNodes                 map[int][]int
	numaNodeOfCPU, l3GroupOfCPU map[int]int
}

const kib = 1024

var fixtureWants = []fixtureWant{
	{
		name: "vm-kvm-epyc-2cpu", online: "0-1",
		sockets: []string{"0-1"},
		nodes:   []nodeWant{{0, "0-1", 11364564 * kib, []int{10}, []int{0}}},
		cores:   2, threadsPerCore: 1,
		l3Groups: []string{"0-1"}, l3SizeBytes: 32 << 20,
		siblings: map[int]string{0: "0", 1: "1"},
		coreIDs:  map[int]int{0: 0, 1: 1},
	},
	{
		name: "xeon-e5-2697v4-2s", online: "0-35",
		sockets: []string{"0-17", "18-35"},
		nodes: []nodeWant{
			{0, "0-17", 65841664 * kib, []int{10, 21}, []int{0}},
			{1, "18-35", 66058712 * kib, []int{21, 10}, []int{1}},
		},
		cores: 36, threadsPerCore: 1,
		l3Groups: []string{"0-17", "18-35"}, l3SizeBytes: 45 << 20,
		siblings: map[int]string{0: "0", 17: "17", 18: "18", 35: "35"},
		// The HCC die's gaps: the fifth core is core_id 4, the sixth core_id 8.
		coreIDs:     map[int]int{0: 0, 4: 4, 5: 8, 8: 11, 9: 16, 13: 20, 14: 24, 17: 27, 18: 0, 23: 8, 35: 27},
		socketNodes: map[int][]int{0: {0}, 1: {1}},
	},
	{
		name: "xeon-gold-6248-2s-smt", online: "0-79",
		sockets: []string{"0-19,40-59", "20-39,60-79"},
		nodes: []nodeWant{
			{0, "0-19,40-59", 196592356 * kib, []int{10, 21}, []int{0}},
			{1, "20-39,60-79", 198158416 * kib, []int{21, 10}, []int{1}},
		},
		cores: 40, threadsPerCore: 2,
		l3Groups: []string{"0-19,40-59", "20-39,60-79"}, l3SizeBytes: 28160 * kib,
		siblings: map[int]string{0: "0,40", 40: "0,40", 19: "19,59", 20: "20,60", 79: "39,79"},
		coreIDs:  map[int]int{4: 4, 5: 8, 19: 28, 59: 28, 20: 0, 39: 28},
	},
	{
		name: "epyc-7451-2s-smt", online: "0-95",
		sockets: []string{"0-23,48-71", "24-47,72-95"},
		nodes: []nodeWant{
			{0, "0-5,48-53", 32637216 * kib, []int{10, 16, 16, 16, 32, 32, 32, 32}, []int{0, 1}},
			{1, "6-11,54-59", 33027612 * kib, []int{16, 10, 16, 16, 32, 32, 32, 32}, []int{2, 3}},
			{2, "12-17,60-65", 33027612 * kib, []int{16, 16, 10, 16, 32, 32, 32, 32}, []int{4, 5}},
			{3, "18-23,66-71", 33027612 * kib, []int{16, 16, 16, 10, 32, 32, 32, 32}, []int{6, 7}},
			{4, "24-29,72-77", 33027612 * kib, []int{32, 32, 32, 32, 10, 16, 16, 16}, []int{8, 9}},
			{5, "30-35,78-83", 33027612 * kib, []int{32, 32, 32, 32, 16, 10, 16, 16}, []int{10, 11}},
			{6, "36-41,84-89", 33027612 * kib, []int{32, 32, 32, 32, 16, 16, 10, 16}, []int{12, 13}},
			{7, "42-47,90-95", 32989440 * kib, []int{32, 32, 32, 32, 16, 16, 16, 10}, []int{14, 15}},
		},
		cores: 48, threadsPerCore: 2,
		l3Groups: []string{
			"0-2,48-50", "3-5,51-53", "6-8,54-56", "9-11,57-59", "12-14,60-62", "15-17,63-65", "18-20,66-68", "21-23,69-71",
			"24-26,72-74", "27-29,75-77", "30-32,78-80", "33-35,81-83", "36-38,84-86", "39-41,87-89", "42-44,90-92", "45-47,93-95",
		},
		l3SizeBytes: 8 << 20,
		siblings:    map[int]string{0: "0,48", 3: "3,51", 47: "47,95"},
		// Rows of util-linux's lscpu dump of this machine (physical core_id column).
		coreIDs:       map[int]int{2: 2, 3: 4, 5: 6, 6: 8, 21: 28, 23: 30, 24: 0, 47: 30, 51: 4, 95: 30},
		socketNodes:   map[int][]int{0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}},
		numaNodeOfCPU: map[int]int{5: 0, 6: 1, 29: 4, 53: 0, 95: 7},
		l3GroupOfCPU:  map[int]int{2: 0, 3: 1, 9: 3, 51: 1, 95: 15},
	},
	{
		name: "xeon-e2278g-offline-isolcpus", online: "0-13", offline: "14-15", isolated: "2-5,10-13",
		sockets: []string{"0-13"},
		nodes:   []nodeWant{{0, "0-13", 65694248 * kib, []int{10}, []int{0}}},
		cores:   8, threadsPerCore: 2,
		l3Groups: []string{"0-13"}, l3SizeBytes: 16 << 20,
		siblings: map[int]string{5: "5,13", 13: "5,13", 6: "6", 7: "7"},
		coreIDs:  map[int]int{6: 6, 7: 7, 13: 5},
	},
	{
		name: "xeon-max-9480-2s-hbm-flat", online: "0-111",
		sockets: []string{"0-55", "56-111"},
		nodes: []nodeWant{
			{0, "0-55", 263573928 * kib, []int{10, 21, 13, 23}, []int{0}},
			{1, "56-111", 264173656 * kib, []int{21, 10, 23, 13}, []int{1}},
			{2, "", 66846720 * kib, []int{13, 23, 10, 23}, []int{}},
			{3, "", 66846720 * kib, []int{23, 13, 23, 10}, []int{}},
		},
		cores: 112, threadsPerCore: 1,
		l3Groups: []string{"0-55", "56-111"}, l3SizeBytes: 115200 * kib,
		siblings:    map[int]string{55: "55", 56: "56"},
		coreIDs:     map[int]int{55: 55, 56: 0},
		socketNodes: map[int][]int{0: {0}, 1: {1}},
	},
}

func fixtureRoot(name string) string { return filepath.Join("testdata", name, "sys") }

func TestDiscoverFixtures(t *testing.T) {
	for _, w := range fixtureWants {
		t.Run(w.name, func(t *testing.T) {
			topo, err := Discover(fixtureRoot(w.name))
			if err != nil {
				t.Fatal(err)
			}
			checkFixture(t, topo, w)
		})
	}
}

func checkFixture(t *testing.T, topo *Topology, w fixtureWant) {
	t.Helper()
	eq := func(what string, got, want any) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	eq("online", topo.OnlineCPUs.String(), w.online)
	eq("offline", topo.OfflineCPUs.String(), w.offline)
	eq("isolated", topo.IsolatedCPUs.String(), w.isolated)
	var sockets, groups []string
	for _, s := range topo.Sockets {
		sockets = append(sockets, s.CPUs.String())
	}
	eq("socket CPUs", sockets, w.sockets)
	var nodes []nodeWant
	for _, n := range topo.NUMANodes {
		nodes = append(nodes, nodeWant{int(n.ID), n.CPUs.String(), n.MemoryBytes, n.distances, ints(n.L3Groups)})
	}
	eq("NUMA nodes", nodes, w.nodes)
	eq("cores", len(topo.Cores), w.cores)
	eq("threads per core", topo.ThreadsPerCore(), w.threadsPerCore)
	for _, g := range topo.L3Groups {
		groups = append(groups, g.CPUs.String())
		eq(fmt.Sprintf("L3 group %d size", g.ID), g.SizeBytes, w.l3SizeBytes)
	}
	eq("L3 groups", groups, w.l3Groups)
	for cpu, want := range w.siblings {
		eq(fmt.Sprintf("siblings of CPU %d", cpu), topo.Siblings(cpu).String(), want)
	}
	for cpu, want := range w.coreIDs {
		c, _ := topo.CPU(cpu)
		eq(fmt.Sprintf("core_id of CPU %d", cpu), topo.Cores[c.Core].KernelCoreID, want)
	}
	for s, want := range w.socketNodes {
		got, _ := topo.Socket(SocketID(s))
		eq(fmt.Sprintf("NUMA nodes of socket %d", s), ints(got.NUMANodes), want)
	}
	for cpu, want := range w.numaNodeOfCPU {
		eq(fmt.Sprintf("NUMA node of CPU %d", cpu), int(topo.NUMANodeOfCPU(cpu)), want)
	}
	for cpu, want := range w.l3GroupOfCPU {
		c, _ := topo.CPU(cpu)
		eq(fmt.Sprintf("L3 group of CPU %d", cpu), int(c.L3Group), want)
	}
	// Every core's threads are on one socket, node and L3 group, and cores are numbered by their
	// lowest CPU (lscpu's CORE column).
	for i, c := range topo.Cores {
		if i > 0 && c.CPUs.List()[0] < topo.Cores[i-1].CPUs.List()[0] {
			t.Errorf("core %d (CPUs %s) comes after core %d (CPUs %s)", i, c.CPUs, i-1, topo.Cores[i-1].CPUs)
		}
		for _, cpu := range c.CPUs.List() {
			p, ok := topo.CPU(cpu)
			if !ok || p.Core != c.ID || int(c.ID) != i || p.Socket != c.Socket || p.NUMANode != c.NUMANode || p.L3Group != c.L3Group {
				t.Errorf("CPU %d = %+v disagrees with its core %+v", cpu, p, c)
			}
		}
	}
}

// TestFixturesHoldExactlyTheFilesRead checks that every fixture — generated or captured — holds
// the files Discover and ReadHardware read and nothing else, so a capture is complete and minimal.
func TestFixturesHoldExactlyTheFilesRead(t *testing.T) {
	for _, w := range fixtureWants {
		root := fixtureRoot(w.name)
		s := newSysfs(root)
		var read []string
		s.trace = func(path string) {
			rel, _ := filepath.Rel(root, path)
			read = append(read, filepath.ToSlash(rel))
		}
		topo, err := discover(s)
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if _, err := readHardware(s, topo); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		have := treeNames(t, root)
		slices.Sort(read)
		read = slices.Compact(read) // node meminfo is read by both
		slices.Sort(have)
		if diff := cmp.Diff(have, read); diff != "" {
			t.Errorf("%s: files in the fixture (-) versus files Discover and ReadHardware read (+):\n%s", w.name, diff)
		}
	}
}
