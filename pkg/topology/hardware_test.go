package topology

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

// hardwareWants are the caches of each fixture as lscpu summarises them, from the machines'
// documentation (testdata/README.md), and the lines `numactl -H` prints for their distances.
var hardwareWants = map[string]struct {
	caches    []string
	distances []string
}{
	"vm-kvm-epyc-2cpu": {caches: []string{
		"L1d: 48.0 KiB × 2 (1 CPU each)", "L1i: 32.0 KiB × 2 (1 CPU each)", "L2: 1.0 MiB × 2 (1 CPU each)", "L3: 32.0 MiB × 1 (2 CPUs each)",
	}, distances: []string{"node    0", "   0:  10"}},
	"xeon-e5-2697v4-2s": {caches: []string{
		"L1d: 32.0 KiB × 36 (1 CPU each)", "L1i: 32.0 KiB × 36 (1 CPU each)", "L2: 256.0 KiB × 36 (1 CPU each)", "L3: 45.0 MiB × 2 (18 CPUs each)",
	}, distances: []string{"node    0   1", "   0:  10  21", "   1:  21  10"}},
	"xeon-gold-6248-2s-smt": {caches: []string{
		"L1d: 32.0 KiB × 40 (2 CPUs each)", "L1i: 32.0 KiB × 40 (2 CPUs each)", "L2: 1.0 MiB × 40 (2 CPUs each)", "L3: 27.5 MiB × 2 (40 CPUs each)",
	}, distances: []string{"   1:  21  10"}},
	"epyc-7451-2s-smt": {caches: []string{
		"L1d: 32.0 KiB × 48 (2 CPUs each)", "L1i: 64.0 KiB × 48 (2 CPUs each)", "L2: 512.0 KiB × 48 (2 CPUs each)", "L3: 8.0 MiB × 16 (6 CPUs each)",
	}, distances: []string{
		"node    0   1   2   3   4   5   6   7",
		"   0:  10  16  16  16  32  32  32  32",
		"   5:  32  32  32  32  16  10  16  16",
	}},
	// CPUs 14 and 15, the second threads of cores 6 and 7, are offline: those cores' L1 and L2
	// caches serve one online CPU.
	"xeon-e2278g-offline-isolcpus": {caches: []string{
		"L1d: 32.0 KiB × 6 (2 CPUs each)", "L1d: 32.0 KiB × 2 (1 CPU each)", "L1i: 32.0 KiB × 6 (2 CPUs each)", "L1i: 32.0 KiB × 2 (1 CPU each)",
		"L2: 256.0 KiB × 6 (2 CPUs each)", "L2: 256.0 KiB × 2 (1 CPU each)", "L3: 16.0 MiB × 1 (14 CPUs each)",
	}},
	"xeon-max-9480-2s-hbm-flat": {caches: []string{
		"L1d: 48.0 KiB × 112 (1 CPU each)", "L1i: 32.0 KiB × 112 (1 CPU each)", "L2: 2.0 MiB × 112 (1 CPU each)", "L3: 112.5 MiB × 2 (56 CPUs each)",
	}, distances: []string{"   2:  13  23  10  23"}},
}

// section returns the lines of a table section: those after the header line up to the next line
// that is not indented.
func section(table, header string) []string {
	_, rest, ok := strings.Cut(table, "\n"+header+"\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(l, " ") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	return lines
}

func readFixtureHardware(t *testing.T, name string) (*Topology, Hardware) {
	t.Helper()
	topo, err := Discover(fixtureRoot(name))
	if err != nil {
		t.Fatal(err)
	}
	hw, err := ReadHardware(fixtureRoot(name), topo)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return topo, hw
}

// Every fixture's caches, memory and distance matrix as lscpu and numactl -H would show them.
func TestReadHardwareFixtures(t *testing.T) {
	for _, w := range fixtureWants {
		want, ok := hardwareWants[w.name]
		if !ok {
			t.Errorf("no hardware expectations for fixture %s", w.name)
			continue
		}
		topo, hw := readFixtureHardware(t, w.name)
		var b bytes.Buffer
		if err := WriteHardwareTable(&b, topo, hw); err != nil {
			t.Fatal(err)
		}
		out := "\n" + b.String()
		if d := cmp.Diff(want.caches, section(out, "Caches:")); d != "" {
			t.Errorf("%s: caches (-want +got):\n%s", w.name, d)
		}
		for _, line := range want.distances {
			if !strings.Contains(out, "\n"+line+"\n") {
				t.Errorf("%s: the distance matrix lacks %q:\n%s", w.name, line, out)
			}
		}
		// Memory: the generated nodes are freshly booted (2 % used, fixturegen's nodeMeminfo);
		// the captured one's free memory is what it was.
		if len(hw.Memory) != len(w.nodes) {
			t.Fatalf("%s: memory of %d nodes, want %d", w.name, len(hw.Memory), len(w.nodes))
		}
		for i, n := range w.nodes {
			m := hw.Memory[i]
			free := n.MemoryBytes - (n.MemoryBytes/kib/50)*kib
			if w.name == "vm-kvm-epyc-2cpu" {
				free = 3288472 * kib
			}
			if int(m.NUMANode) != n.ID || m.TotalBytes != n.MemoryBytes || !m.FreeKnown || m.FreeBytes != free {
				t.Errorf("%s: node memory %+v, want node %d total %d free %d", w.name, m, n.ID, n.MemoryBytes, free)
			}
		}
		if w.name != "vm-kvm-epyc-2cpu" && len(hw.PCIDevices) != 0 {
			t.Errorf("%s: PCI devices %v in a fixture generated without any", w.name, hw.PCIDevices)
		}
	}
}

// The captured machine's PCI devices (a virtio disk and a virtio network adapter, whose eth0 is
// one level down) and its JSON form.
func TestReadHardwareCapturedPCI(t *testing.T) {
	topo, hw := readFixtureHardware(t, "vm-kvm-epyc-2cpu")
	want := []PCIDeviceView{
		{Address: "0000:00:02.0", Kind: "storage", Class: "0x018000", Vendor: "0x1af4", Device: "0x1042", NUMANode: -1},
		{Address: "0000:00:03.0", Kind: "network", Class: "0x020000", Vendor: "0x1af4", Device: "0x1041", NUMANode: -1,
			Interfaces: []NetInterfaceView{{Name: "eth0", OperState: "up"}}},
	}
	v := hw.View()
	if d := cmp.Diff(want, v.PCIDevices); d != "" {
		t.Errorf("PCI devices (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]CacheView{
		{"L1d", 1, "Data", 48 << 10, "0"}, {"L1d", 1, "Data", 48 << 10, "1"}, {"L1i", 1, "Instruction", 32 << 10, "0"}, {"L1i", 1, "Instruction", 32 << 10, "1"},
		{"L2", 2, "Unified", 1 << 20, "0"}, {"L2", 2, "Unified", 1 << 20, "1"}, {"L3", 3, "Unified", 32 << 20, "0-1"},
	}, v.Caches); d != "" {
		t.Errorf("caches (-want +got):\n%s", d)
	}
	var b bytes.Buffer
	if err := WriteHardwareTable(&b, topo, hw); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"NUMA memory:\n  node 0 size: 10.8 GiB free: 3.1 GiB\n",
		"PCI devices:\n  no NUMA node (the firmware does not say):\n    0000:00:02.0 storage 1af4:1042 (class 0x018000)\n    0000:00:03.0 network 1af4:1041 (class 0x020000) eth0 (up)\n",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
}

// writeTree writes files (relative path → content) under a new sysfs root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, data := range files {
		writeFile(t, root, rel, data)
	}
	return root
}

// twoNodePCI is a host of two single-CPU NUMA nodes without caches, with a GPU and an InfiniBand
// adapter on node 1 and a bridge, which is left out.
func twoNodePCI() map[string]string {
	files := map[string]string{
		"bus/pci/devices/0000:00:00.0/class":                   "0x060400\n",
		"bus/pci/devices/0000:3b:00.0/class":                   "0x030200\n",
		"bus/pci/devices/0000:3b:00.0/vendor":                  "0x10de\n",
		"bus/pci/devices/0000:3b:00.0/device":                  "0x2330\n",
		"bus/pci/devices/0000:3b:00.0/numa_node":               "1\n",
		"bus/pci/devices/0000:5e:00.0/class":                   "0x020700\n",
		"bus/pci/devices/0000:5e:00.0/vendor":                  "0x15b3\n",
		"bus/pci/devices/0000:5e:00.0/device":                  "0x1021\n",
		"bus/pci/devices/0000:5e:00.0/numa_node":               "1\n",
		"bus/pci/devices/0000:5e:00.0/net/ib0/operstate":       "up\n",
		"bus/pci/devices/0000:5e:00.0/net/ib1/operstate":       "down\n",
		"devices/system/node/node0/meminfo":                    "Node 0 MemTotal: 1024 kB\nNode 0 MemFree: 512 kB\n",
		"devices/system/node/node1/meminfo":                    "Node 1 MemTotal: 2048 kB\nNode 1 MemFree: 100 kB\n",
		"devices/system/cpu/cpu0/cache/index0/level":           "2\n",
		"devices/system/cpu/cpu0/cache/index0/type":            "Unified\n",
		"devices/system/cpu/cpu0/cache/index0/shared_cpu_list": "0-1\n",
	}
	return files
}

func twoNodeTopology(t *testing.T) *Topology {
	t.Helper()
	topo, err := New(Spec{
		CPUs: []CPUSpec{{ID: 0, NUMANode: 0, KernelCoreID: 0, L3: 0}, {ID: 1, NUMANode: 1, KernelCoreID: 1, L3: 0}},
		NUMANodes: []NUMANodeSpec{
			{ID: 0, MemoryBytes: 1 << 20, Distances: []int{10, 20}},
			{ID: 1, MemoryBytes: 2 << 20, Distances: []int{20, 10}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// A GPU and a NIC on NUMA node 1 are listed under it; a cache without a size is listed with size
// unknown, and a bridge is left out.
func TestReadHardwareGPUAndNICOnNode(t *testing.T) {
	topo := twoNodeTopology(t)
	hw, err := ReadHardware(writeTree(t, twoNodePCI()), topo)
	if err != nil {
		t.Fatal(err)
	}
	want := Hardware{
		Caches: []Cache{{Level: 2, Type: "Unified", CPUs: cpuset.New(0, 1)}},
		Memory: []NodeMemory{{0, 1 << 20, 512 << 10, true}, {1, 2 << 20, 100 << 10, true}},
		PCIDevices: []PCIDevice{
			{Address: "0000:3b:00.0", Kind: PCIGPU, Class: 0x030200, Vendor: 0x10de, Device: 0x2330, NUMANode: 1},
			{Address: "0000:5e:00.0", Kind: PCINetwork, Class: 0x020700, Vendor: 0x15b3, Device: 0x1021, NUMANode: 1,
				Interfaces: []NetInterface{{"ib0", "up"}, {"ib1", "down"}}},
		},
	}
	if d := cmp.Diff(want, hw, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })); d != "" {
		t.Errorf("hardware (-want +got):\n%s", d)
	}
	var b bytes.Buffer
	if err := WriteHardwareTable(&b, topo, hw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Caches:\n  L2: size unknown × 1 (2 CPUs each)\n") ||
		!strings.Contains(b.String(), "PCI devices:\n  NUMA node 1:\n    0000:3b:00.0 gpu 10de:2330 (class 0x030200)\n    0000:5e:00.0 network 15b3:1021 (class 0x020700) ib0 (up), ib1 (down)\n") {
		t.Errorf("table:\n%s", b.String())
	}
}

// Malformed or contradictory files are errors naming the file; a host without node directory
// has no free memory figure, one without bus/pci and caches none of them.
func TestReadHardwareBadInput(t *testing.T) {
	topo := twoNodeTopology(t)
	for _, tc := range []struct {
		name   string
		change map[string]string
		want   string
	}{
		{"class without 0x", map[string]string{"bus/pci/devices/0000:3b:00.0/class": "030200\n"}, "0000:3b:00.0/class: want a hexadecimal number with its 0x prefix"},
		{"device on an offline node", map[string]string{"bus/pci/devices/0000:3b:00.0/numa_node": "3\n"}, "numa_node names node 3, which is not online"},
		{"numa_node below -1", map[string]string{"bus/pci/devices/0000:3b:00.0/numa_node": "-2\n"}, "-2 is below -1"},
		{"no MemFree", map[string]string{"devices/system/node/node1/meminfo": "Node 1 MemTotal: 2048 kB\n"}, `node1/meminfo: want a "Node 1 MemFree: <n> kB" line: no MemFree line`},
		{"bad cache type", map[string]string{"devices/system/cpu/cpu0/cache/index0/type": "Both\n"}, `index0/type: want "Data", "Instruction" or "Unified"`},
		{"cache not shared with its CPU", map[string]string{"devices/system/cpu/cpu0/cache/index0/shared_cpu_list": "1\n"}, "CPU 0 is not in it"},
		{"empty operstate", map[string]string{"bus/pci/devices/0000:5e:00.0/net/ib0/operstate": ""}, "ib0/operstate"},
	} {
		files := twoNodePCI()
		for k, v := range tc.change {
			files[k] = v
		}
		_, err := ReadHardware(writeTree(t, files), topo)
		var fe *FileError
		if err == nil || !strings.Contains(err.Error(), tc.want) || (!errors.As(err, &fe) && !errors.Is(err, ErrInconsistent)) {
			t.Errorf("%s: ReadHardware = %v, want a file or inconsistency error with %q", tc.name, err, tc.want)
		}
	}
	files := twoNodePCI()
	delete(files, "bus/pci/devices/0000:3b:00.0/vendor")
	if _, err := ReadHardware(writeTree(t, files), topo); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing vendor: %v, want fs.ErrNotExist", err)
	}
	hw, err := ReadHardware(t.TempDir(), topo)
	if err != nil || len(hw.Caches) != 0 || len(hw.PCIDevices) != 0 || len(hw.Memory) != 2 || hw.Memory[1].FreeKnown || hw.Memory[1].TotalBytes != 2<<20 {
		t.Errorf("an empty sysfs gives %+v, %v; want no caches or devices and the topology's memory without free figures", hw, err)
	}
}
