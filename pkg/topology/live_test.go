package topology

import (
	"encoding/xml"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jaypipes/ghw"
	"k8s.io/utils/cpuset"
)

// These tests read the machine they run on and compare Discover("/sys") with what other tools
// make of the same kernel: util-linux's lscpu, hwloc's lstopo and jaypipes/ghw.

func liveTopology(t *testing.T) *Topology {
	t.Helper()
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skipf("this machine has no sysfs at /sys: %v", err)
	}
	topo, err := Discover("/sys")
	if err != nil {
		t.Fatalf("Discover(/sys): %v", err)
	}
	return topo
}

// memoryBetween checks a node's memory as another tool saw it against two Discover runs around
// that tool's: virtual machines grow and shrink their memory while the tests run.
func memoryBetween(t *testing.T, tool string, node NUMAID, got uint64, before, after *Topology) {
	t.Helper()
	n1, ok1 := before.NUMANode(node)
	n2, ok2 := after.NUMANode(node)
	lo, hi := min(n1.MemoryBytes, n2.MemoryBytes), max(n1.MemoryBytes, n2.MemoryBytes)
	if !ok1 || !ok2 || got < lo || got > hi {
		t.Errorf("%s says node %d has %d bytes; Discover read %d before and %d after", tool, node, got, n1.MemoryBytes, n2.MemoryBytes)
	}
}

// bijection checks that the labels another tool gives CPUs group them exactly as ours do.
func bijection(t *testing.T, what string, theirs, ours map[int]int) {
	t.Helper()
	fwd, back := map[int]int{}, map[int]int{}
	for cpu, a := range theirs {
		b, ok := ours[cpu]
		if !ok {
			t.Errorf("%s: CPU %d is unknown to Discover", what, cpu)
			continue
		}
		if prev, seen := fwd[a]; seen && prev != b {
			t.Errorf("%s: the other tool's %d is our %d and %d", what, a, prev, b)
		}
		if prev, seen := back[b]; seen && prev != a {
			t.Errorf("%s: our %d is the other tool's %d and %d", what, b, prev, a)
		}
		fwd[a], back[b] = b, a
	}
}

func TestDiscoverLiveMatchesLscpu(t *testing.T) {
	topo := liveTopology(t)
	if _, err := exec.LookPath("lscpu"); err != nil {
		t.Skip("lscpu is not installed (Debian package util-linux, in hack/deps.sh group test)")
	}
	out, err := exec.Command("lscpu", "-p=CPU,CORE,SOCKET,NODE,CACHE").Output()
	if err != nil {
		t.Fatalf("lscpu -p: %v", err)
	}
	var header []string
	rows := map[int][]string{}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if h, ok := strings.CutPrefix(line, "# "); ok && strings.HasPrefix(h, "CPU,") {
			header = strings.Split(h, ",")
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		cpu, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("lscpu row %q: %v", line, err)
		}
		rows[cpu] = f
	}
	l3 := slices.Index(header, "L3")
	if header == nil || slices.Index(header, "Core") != 1 || slices.Index(header, "Socket") != 2 || slices.Index(header, "Node") != 3 {
		t.Fatalf("unexpected lscpu header %q", header)
	}
	var listed []int
	theirSocket, ourSocket, theirL3, ourL3 := map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}
	for cpu, f := range rows {
		listed = append(listed, cpu)
		c, ok := topo.CPU(cpu)
		if !ok {
			t.Errorf("lscpu lists CPU %d, which Discover does not see online", cpu)
			continue
		}
		if got, want := f[1], strconv.Itoa(int(topo.Cores[c.Core].ID)); got != want {
			t.Errorf("CPU %d: lscpu core %s, Discover core %s", cpu, got, want)
		}
		if got, want := f[3], strconv.Itoa(int(c.NUMANode)); got != want && !(got == "" && len(topo.NUMANodes) == 1) {
			t.Errorf("CPU %d: lscpu node %q, Discover node %s", cpu, got, want)
		}
		theirSocket[cpu], _ = strconv.Atoi(f[2])
		ourSocket[cpu] = int(c.Socket)
		if l3 >= 0 && l3 < len(f) && f[l3] != "" {
			theirL3[cpu], _ = strconv.Atoi(f[l3])
			ourL3[cpu] = int(c.L3Group)
		} else if c.L3Group >= 0 {
			t.Errorf("CPU %d: lscpu shows no L3, Discover L3 group %d", cpu, c.L3Group)
		}
	}
	if got := cpuset.New(listed...); !got.Equals(topo.OnlineCPUs) {
		t.Errorf("lscpu lists CPUs %s, Discover %s", got, topo.OnlineCPUs)
	}
	bijection(t, "sockets", theirSocket, ourSocket)
	bijection(t, "L3 caches", theirL3, ourL3)
}

// hwlocObject is one object of lstopo's XML export, with the attributes of NUMA nodes, caches,
// PCI devices and OS devices.
type hwlocObject struct {
	Type        string        `xml:"type,attr"`
	OSIndex     int           `xml:"os_index,attr"`
	CPUSet      string        `xml:"cpuset,attr"`
	LocalMemory uint64        `xml:"local_memory,attr"`
	CacheSize   uint64        `xml:"cache_size,attr"`
	PCIBusID    string        `xml:"pci_busid,attr"`
	PCIType     string        `xml:"pci_type,attr"`
	Name        string        `xml:"name,attr"`
	OSDevType   string        `xml:"osdev_type,attr"`
	Children    []hwlocObject `xml:"object"`
}

func (o hwlocObject) walk(visit func(hwlocObject)) {
	visit(o)
	for _, c := range o.Children {
		c.walk(visit)
	}
}

// parseHwlocSet reads hwloc's bitmap format: comma-separated 32-bit hex words, most significant
// first ("0x000000ff,0xffffffff").
func parseHwlocSet(s string) (cpuset.CPUSet, error) {
	n := new(big.Int)
	for _, word := range strings.Split(s, ",") {
		w, err := strconv.ParseUint(strings.TrimPrefix(word, "0x"), 16, 32)
		if err != nil {
			return cpuset.New(), fmt.Errorf("hwloc set %q: %w", s, err)
		}
		n.Lsh(n, 32).Or(n, new(big.Int).SetUint64(w))
	}
	var ids []int
	for i := 0; i < n.BitLen(); i++ {
		if n.Bit(i) == 1 {
			ids = append(ids, i)
		}
	}
	return cpuset.New(ids...), nil
}

func TestDiscoverLiveMatchesLstopo(t *testing.T) {
	before := liveTopology(t)
	if _, err := exec.LookPath("lstopo-no-graphics"); err != nil {
		t.Skip("lstopo-no-graphics is not installed (Debian package hwloc: . hack/deps.sh && install_deps hwloc)")
	}
	out, err := exec.Command("lstopo-no-graphics", "--of", "xml", "--disallowed", "--no-io", "-").Output()
	if err != nil {
		t.Fatalf("lstopo: %v", err)
	}
	after := liveTopology(t)
	var root struct {
		Objects []hwlocObject `xml:"object"`
	}
	if err := xml.Unmarshal(out, &root); err != nil {
		t.Fatalf("lstopo XML: %v", err)
	}
	theirs := map[string][]string{}
	nodes := map[int]hwlocObject{}
	for _, top := range root.Objects {
		top.walk(func(o hwlocObject) {
			set, err := parseHwlocSet(o.CPUSet)
			if err != nil {
				t.Fatal(err)
			}
			switch o.Type {
			case "Package", "Core", "L3Cache", "PU":
				theirs[o.Type] = append(theirs[o.Type], set.String())
			case "NUMANode":
				o.CPUSet = set.String()
				nodes[o.OSIndex] = o
			}
		})
	}
	ours := map[string][]string{}
	for _, s := range before.Sockets {
		ours["Package"] = append(ours["Package"], s.CPUs.String())
	}
	for _, c := range before.Cores {
		ours["Core"] = append(ours["Core"], c.CPUs.String())
	}
	for _, g := range before.L3Groups {
		ours["L3Cache"] = append(ours["L3Cache"], g.CPUs.String())
	}
	for _, cpu := range before.OnlineCPUs.List() {
		ours["PU"] = append(ours["PU"], strconv.Itoa(cpu))
	}
	for typ := range ours {
		slices.Sort(ours[typ])
		slices.Sort(theirs[typ])
	}
	if diff := cmp.Diff(ours, theirs); diff != "" {
		t.Errorf("CPU sets per object type (-Discover +lstopo):\n%s", diff)
	}
	if len(nodes) != len(before.NUMANodes) {
		t.Errorf("lstopo shows %d NUMA nodes, Discover %d", len(nodes), len(before.NUMANodes))
	}
	for _, n := range before.NUMANodes {
		h, ok := nodes[int(n.ID)]
		if !ok {
			t.Errorf("lstopo has no NUMA node %d", n.ID)
			continue
		}
		if h.CPUSet != n.CPUs.String() {
			t.Errorf("NUMA node %d: lstopo CPUs %q, Discover %q", n.ID, h.CPUSet, n.CPUs)
		}
		memoryBetween(t, "lstopo", n.ID, h.LocalMemory, before, after)
	}
}

func TestDiscoverLiveMatchesGhw(t *testing.T) {
	before := liveTopology(t)
	info, err := ghw.Topology(ghw.WithDisableWarnings())
	if err != nil {
		t.Fatalf("ghw.Topology: %v", err)
	}
	after := liveTopology(t)
	if len(info.Nodes) == 0 {
		t.Skip("ghw found no NUMA nodes and no error: its silent failure when a node lacks a hugepages directory; nothing to compare")
	}
	if len(info.Nodes) != len(before.NUMANodes) {
		t.Fatalf("ghw sees %d NUMA nodes, Discover %d", len(info.Nodes), len(before.NUMANodes))
	}
	for _, gn := range info.Nodes {
		n, ok := before.NUMANode(NUMAID(gn.ID))
		if !ok {
			t.Errorf("ghw has NUMA node %d, Discover does not", gn.ID)
			continue
		}
		var cpus []int
		for _, c := range gn.Cores {
			cpus = append(cpus, c.LogicalProcessors...)
		}
		if got := cpuset.New(cpus...); !got.Equals(n.CPUs) {
			t.Errorf("node %d: ghw CPUs %s, Discover %s", gn.ID, got, n.CPUs)
		}
		if diff := cmp.Diff(n.distances, gn.Distances); diff != "" {
			t.Errorf("node %d distances (-Discover +ghw):\n%s", gn.ID, diff)
		}
		// ghw groups a node's threads by core_id alone, which matches Discover's cores as long as
		// a node does not span sockets.
		if got, want := len(gn.Cores), len(n.Cores); got != want {
			t.Errorf("node %d: ghw counts %d cores, Discover %d", gn.ID, got, want)
		}
		memoryBetween(t, "ghw", n.ID, uint64(gn.Memory.TotalUsableBytes), before, after)
	}
}

// TestGhwSilentFailureDiscoverAvoids documents why finegrain has its own reader: on a tree without
// nodeN/hugepages (a capture, a restricted container mount) ghw reports zero NUMA nodes and no
// error, while Discover reads the machine.
func TestGhwSilentFailureDiscoverAvoids(t *testing.T) {
	info, err := ghw.Topology(ghw.WithChroot("testdata/xeon-e5-2697v4-2s"), ghw.WithDisableWarnings())
	if err == nil && len(info.Nodes) == 0 {
		t.Logf("ghw on the E5-2697 v4 fixture: %v, nil error", info)
	} else {
		t.Logf("ghw on the E5-2697 v4 fixture: %v, %v (no longer the silent zero-node result)", info, err)
	}
	topo := discoverFixture(t, "xeon-e5-2697v4-2s")
	if got := len(topo.NUMANodes); got != 2 {
		t.Errorf("Discover found %d NUMA nodes on the same tree, want 2", got)
	}
}
