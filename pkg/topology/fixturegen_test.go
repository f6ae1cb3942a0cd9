package topology

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// The sysfs fixtures of machines we cannot capture here are generated from their documented
// layouts (testdata/README.md gives the source of every fact) by writing the files the kernel
// would show, restricted to the files Discover and ReadHardware read — what hack/capture-sysfs.sh
// copies from such a machine (no PCI devices: their documentation does not say which adapters a
// node has). TestGeneratedFixturesAreCurrent keeps the committed trees equal to the generator;
// regenerate them with
//
//	go test ./pkg/topology -run TestGeneratedFixturesAreCurrent -update-fixtures
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite the generated sysfs fixtures under testdata/")

type fixtureMachine struct {
	name string
	cpus []fixtureCPU // every possible CPU, in ID order
	// isolated is devices/system/cpu/isolated as the kernel prints it (it may name offline CPUs).
	isolated string
	nodes    []fixtureNode
	// Cache sizes in KiB.
	l1dK, l1iK, l2K, l3K int
}

type fixtureCPU struct {
	id, socket, die, coreID, node int
	offline                       bool
	// l2ID is the id attribute of the core's L1 and L2 caches (the APIC ID without the SMT bit on
	// x86); l3ID that of its L3.
	l2ID, l3ID int
}

type fixtureNode struct {
	id        int
	memKB     uint64
	distances []int
}

// broadwellE5_2697v4 is the paper's node: 2 × Xeon E5-2697 v4 (18 cores, Hyper-Threading off).
// The 18 cores of the 24-slot HCC die report core_ids 0-4, 8-11, 16-20, 24-27.
func broadwellE5_2697v4() fixtureMachine {
	coreIDs := []int{0, 1, 2, 3, 4, 8, 9, 10, 11, 16, 17, 18, 19, 20, 24, 25, 26, 27}
	m := fixtureMachine{name: "xeon-e5-2697v4-2s", l1dK: 32, l1iK: 32, l2K: 256, l3K: 46080,
		nodes: []fixtureNode{{0, 65841664, []int{10, 21}}, {1, 66058712, []int{21, 10}}}}
	for s := 0; s < 2; s++ {
		for k, id := range coreIDs {
			apic := s<<6 | id<<1
			m.cpus = append(m.cpus, fixtureCPU{id: s*18 + k, socket: s, coreID: id, node: s, l2ID: apic >> 1, l3ID: apic >> 6})
		}
	}
	return m
}

// cascadeLakeGold6248 is 2 × Xeon Gold 6248 (20 cores, Hyper-Threading on): Linux numbers the
// first thread of every core of both sockets, then the second threads, so CPU i and i+40 are
// siblings. The 20 cores of the XCC die report core_ids 0-4, 8-12, 16-20, 24-28.
func cascadeLakeGold6248() fixtureMachine {
	coreIDs := []int{0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20, 24, 25, 26, 27, 28}
	m := fixtureMachine{name: "xeon-gold-6248-2s-smt", l1dK: 32, l1iK: 32, l2K: 1024, l3K: 28160,
		nodes: []fixtureNode{{0, 196592356, []int{10, 21}}, {1, 198158416, []int{21, 10}}}}
	for t := 0; t < 2; t++ {
		for s := 0; s < 2; s++ {
			for k, id := range coreIDs {
				apic := s<<6 | id<<1 | t
				m.cpus = append(m.cpus, fixtureCPU{id: t*40 + s*20 + k, socket: s, coreID: id, node: s, l2ID: apic >> 1, l3ID: apic >> 6})
			}
		}
	}
	return m
}

// epyc7451 is 2 × AMD EPYC 7451 (24 cores, SMT on), the machine of util-linux's lscpu test dump
// lscpu-x86_64-epyc_7451: four dies per socket, each its own NUMA node with two CCXs of three
// cores, each CCX one 8 MiB L3. core_ids skip every fourth slot (0-2, 4-6, ..., 28-30); CPU i and
// i+48 are siblings.
func epyc7451() fixtureMachine {
	m := fixtureMachine{name: "epyc-7451-2s-smt", l1dK: 32, l1iK: 64, l2K: 512, l3K: 8192}
	mem := []uint64{32637216, 33027612, 33027612, 33027612, 33027612, 33027612, 33027612, 32989440}
	for n := 0; n < 8; n++ {
		d := make([]int, 8)
		for o := range d {
			switch {
			case o == n:
				d[o] = 10
			case o/4 == n/4:
				d[o] = 16
			default:
				d[o] = 32
			}
		}
		m.nodes = append(m.nodes, fixtureNode{n, mem[n], d})
	}
	for t := 0; t < 2; t++ {
		for s := 0; s < 2; s++ {
			for k := 0; k < 24; k++ {
				id := k/3*4 + k%3
				apic := s<<6 | id<<1 | t
				m.cpus = append(m.cpus, fixtureCPU{id: t*48 + s*24 + k, socket: s, coreID: id, node: s*4 + k/6, l2ID: apic >> 1, l3ID: apic >> 3})
			}
		}
	}
	return m
}

// xeonE2278GIsolated is a one-socket Xeon E-2278G (8 cores, Hyper-Threading on) booted with
// isolcpus=2-5,10-15 whose CPUs 14 and 15 (the second threads of cores 6 and 7) were taken offline
// through cpuN/online. The kernel keeps listing 14-15 in cpu/isolated; their cores show one thread.
func xeonE2278GIsolated() fixtureMachine {
	m := fixtureMachine{name: "xeon-e2278g-offline-isolcpus", isolated: "2-5,10-15", l1dK: 32, l1iK: 32, l2K: 256, l3K: 16384,
		nodes: []fixtureNode{{0, 65694248, []int{10}}}}
	for t := 0; t < 2; t++ {
		for k := 0; k < 8; k++ {
			id := t*8 + k
			m.cpus = append(m.cpus, fixtureCPU{id: id, coreID: k, l2ID: k, offline: id >= 14})
		}
	}
	return m
}

// xeonMax9480Flat is 2 × Xeon CPU Max 9480 (56 cores, Hyper-Threading off) in HBM flat mode with
// quadrant clustering: DDR5 and the cores form nodes 0 and 1, each socket's 64 GiB of HBM is a
// memory-only node (2 and 3) at distance 13 from its own socket.
func xeonMax9480Flat() fixtureMachine {
	m := fixtureMachine{name: "xeon-max-9480-2s-hbm-flat", l1dK: 48, l1iK: 32, l2K: 2048, l3K: 115200,
		nodes: []fixtureNode{
			{0, 263573928, []int{10, 21, 13, 23}},
			{1, 264173656, []int{21, 10, 23, 13}},
			{2, 66846720, []int{13, 23, 10, 23}},
			{3, 66846720, []int{23, 13, 23, 10}},
		}}
	for s := 0; s < 2; s++ {
		for k := 0; k < 56; k++ {
			apic := s<<7 | k<<1
			m.cpus = append(m.cpus, fixtureCPU{id: s*56 + k, socket: s, coreID: k, node: s, l2ID: apic >> 1, l3ID: apic >> 7})
		}
	}
	return m
}

func generatedFixtures() []fixtureMachine {
	return []fixtureMachine{broadwellE5_2697v4(), cascadeLakeGold6248(), epyc7451(), xeonE2278GIsolated(), xeonMax9480Flat()}
}

// files renders the machine's sysfs files, keyed by path relative to the sysfs root.
func (m fixtureMachine) files() map[string]string {
	f := map[string]string{}
	list := func(ids []int) string { return cpuset.New(ids...).String() + "\n" }
	var all, online []int
	for _, c := range m.cpus {
		all = append(all, c.id)
		if !c.offline {
			online = append(online, c.id)
		}
	}
	offline := cpuset.New(all...).Difference(cpuset.New(online...)).List()
	cpu := "devices/system/cpu/"
	f[cpu+"online"], f[cpu+"offline"], f[cpu+"possible"], f[cpu+"present"] = list(online), list(offline), list(all), list(all)
	f[cpu+"isolated"] = m.isolated + "\n"
	onlineWith := func(same func(a, b fixtureCPU) bool, c fixtureCPU) string {
		var ids []int
		for _, o := range m.cpus {
			if !o.offline && same(c, o) {
				ids = append(ids, o.id)
			}
		}
		return list(ids)
	}
	leader := map[int]int{}     // L3 id -> lowest online CPU sharing it
	coreLeader := map[int]int{} // L2 id -> lowest online CPU sharing it (the core's first thread)
	for _, c := range m.cpus {
		if l, ok := leader[c.l3ID]; !c.offline && (!ok || c.id < l) {
			leader[c.l3ID] = c.id
		}
		if l, ok := coreLeader[c.l2ID]; !c.offline && (!ok || c.id < l) {
			coreLeader[c.l2ID] = c.id
		}
	}
	for _, c := range m.cpus {
		if c.offline {
			continue
		}
		d := fmt.Sprintf("%scpu%d/", cpu, c.id)
		f[d+"topology/physical_package_id"] = fmt.Sprintf("%d\n", c.socket)
		f[d+"topology/die_id"] = fmt.Sprintf("%d\n", c.die)
		f[d+"topology/core_id"] = fmt.Sprintf("%d\n", c.coreID)
		f[d+"topology/thread_siblings_list"] = onlineWith(func(a, b fixtureCPU) bool {
			return a.socket == b.socket && a.die == b.die && a.coreID == b.coreID
		}, c)
		// ReadHardware reads the L1 and L2 caches of a core's lowest online thread (the others are
		// in its shared_cpu_list), Discover the levels of an L3 group's lowest online CPU.
		if coreLeader[c.l2ID] == c.id {
			core := onlineWith(func(a, b fixtureCPU) bool { return a.l2ID == b.l2ID }, c)
			for i, cache := range []struct {
				level int
				typ   string
				kib   int
			}{{1, "Data", m.l1dK}, {1, "Instruction", m.l1iK}, {2, "Unified", m.l2K}} {
				idx := fmt.Sprintf("%scache/index%d/", d, i)
				f[idx+"level"], f[idx+"type"] = fmt.Sprintf("%d\n", cache.level), cache.typ+"\n"
				f[idx+"shared_cpu_list"], f[idx+"size"] = core, fmt.Sprintf("%dK\n", cache.kib)
			}
		}
		if leader[c.l3ID] != c.id {
			continue
		}
		f[d+"cache/index0/level"], f[d+"cache/index1/level"], f[d+"cache/index2/level"] = "1\n", "1\n", "2\n"
		l3 := d + "cache/index3/"
		f[l3+"level"], f[l3+"type"] = "3\n", "Unified\n"
		f[l3+"shared_cpu_list"] = onlineWith(func(a, b fixtureCPU) bool { return a.l3ID == b.l3ID }, c)
		f[l3+"size"] = fmt.Sprintf("%dK\n", m.l3K)
		f[l3+"id"] = fmt.Sprintf("%d\n", c.l3ID)
	}
	node := "devices/system/node/"
	var ids, withCPU, withMem []int
	for _, n := range m.nodes {
		ids = append(ids, n.id)
		var cpus []int
		for _, c := range m.cpus {
			if !c.offline && c.node == n.id {
				cpus = append(cpus, c.id)
			}
		}
		if len(cpus) > 0 {
			withCPU = append(withCPU, n.id)
		}
		if n.memKB > 0 {
			withMem = append(withMem, n.id)
		}
		d := fmt.Sprintf("%snode%d/", node, n.id)
		f[d+"cpulist"] = list(cpus)
		f[d+"meminfo"] = nodeMeminfo(n)
		dist := make([]string, len(n.distances))
		for i, v := range n.distances {
			dist[i] = fmt.Sprint(v)
		}
		f[d+"distance"] = strings.Join(dist, " ") + "\n"
	}
	f[node+"online"], f[node+"possible"], f[node+"has_cpu"], f[node+"has_memory"] = list(ids), list(ids), list(withCPU), list(withMem)
	return f
}

// nodeMeminfo writes the head of nodeN/meminfo in the kernel's format, with a freshly booted
// node's usage.
func nodeMeminfo(n fixtureNode) string {
	used := n.memKB / 50
	var b strings.Builder
	for _, l := range []struct {
		name string
		kb   uint64
	}{{"MemTotal", n.memKB}, {"MemFree", n.memKB - used}, {"MemUsed", used}, {"SwapCached", 0}, {"Active", used / 3}, {"Inactive", used / 4}} {
		fmt.Fprintf(&b, "Node %d %-16s%8d kB\n", n.id, l.name+":", l.kb)
	}
	for _, name := range []string{"HugePages_Total", "HugePages_Free", "HugePages_Surp"} {
		fmt.Fprintf(&b, "Node %d %s: %5d\n", n.id, name, 0)
	}
	return b.String()
}

// treeNames lists the regular files under dir as slash-separated relative paths.
func treeNames(t testing.TB, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("list fixture tree %s: %v", dir, err)
	}
	return names
}

// treeFiles reads every regular file under dir, keyed by relative path.
func treeFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		got[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("read fixture tree %s: %v", dir, err)
	}
	return got
}

func TestGeneratedFixturesAreCurrent(t *testing.T) {
	for _, m := range generatedFixtures() {
		root := filepath.Join("testdata", m.name, "sys")
		want := m.files()
		if *updateFixtures {
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			for rel, data := range want {
				path := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := treeFiles(t, root)
		var diffs []string
		for rel, data := range want {
			if got[rel] != data {
				diffs = append(diffs, rel)
			}
		}
		for rel := range got {
			if _, ok := want[rel]; !ok {
				diffs = append(diffs, rel+" (not generated)")
			}
		}
		slices.Sort(diffs)
		if len(diffs) > 0 {
			t.Errorf("fixture %s differs from its generator in %d files, first %s; rerun with -update-fixtures", m.name, len(diffs), diffs[0])
		}
	}
}
