package topology

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ReadHardware on this machine's /sys against hwloc's lstopo, which reads the same kernel its own
// way: the same cache instances (kind, size, CPUs), and every network, GPU, accelerator and
// storage PCI device with its IDs and network interfaces.
func TestReadHardwareLiveMatchesLstopo(t *testing.T) {
	topo := liveTopology(t)
	hw, err := ReadHardware("/sys", topo)
	if err != nil {
		t.Fatalf("ReadHardware(/sys): %v", err)
	}
	if _, err := exec.LookPath("lstopo-no-graphics"); err != nil {
		t.Skip("lstopo-no-graphics is not installed (Debian package hwloc: . hack/deps.sh && install_deps hwloc)")
	}
	out, err := exec.Command("lstopo-no-graphics", "--of", "xml", "--disallowed", "--whole-io", "-").Output()
	if err != nil {
		t.Fatalf("lstopo: %v", err)
	}
	var root struct {
		Objects []hwlocObject `xml:"object"`
	}
	if err := xml.Unmarshal(out, &root); err != nil {
		t.Fatalf("lstopo XML: %v", err)
	}
	cacheNames := map[string]string{"L1Cache": "L1d", "L1iCache": "L1i", "L2Cache": "L2", "L3Cache": "L3", "L4Cache": "L4"}
	var theirCaches, theirDevices []string
	for _, top := range root.Objects {
		top.walk(func(o hwlocObject) {
			if name, ok := cacheNames[o.Type]; ok {
				set, err := parseHwlocSet(o.CPUSet)
				if err != nil {
					t.Fatal(err)
				}
				theirCaches = append(theirCaches, fmt.Sprintf("%s %d %s", name, o.CacheSize, set))
			}
			if o.Type != "PCIDev" {
				return
			}
			// pci_type is "CCSS [vvvv:dddd] ...": class and subclass, vendor and device.
			fields := strings.Fields(o.PCIType)
			class, err := strconv.ParseUint(fields[0], 16, 16)
			if err != nil {
				t.Fatalf("lstopo pci_type %q: %v", o.PCIType, err)
			}
			if _, ok := pciKind(class << 8); !ok {
				return
			}
			dev := o.PCIBusID + " " + strings.Trim(fields[1], "[]")
			for _, c := range o.Children {
				if c.Type == "OSDev" && c.OSDevType == "2" { // a network interface
					dev += " " + c.Name
				}
			}
			theirDevices = append(theirDevices, dev)
		})
	}
	var ourCaches, ourDevices []string
	for _, c := range hw.Caches {
		ourCaches = append(ourCaches, fmt.Sprintf("%s %d %s", c.Name(), c.SizeBytes, c.CPUs))
	}
	for _, d := range hw.PCIDevices {
		dev := fmt.Sprintf("%s %04x:%04x", d.Address, d.Vendor, d.Device)
		for _, n := range d.Interfaces {
			dev += " " + n.Name
		}
		ourDevices = append(ourDevices, dev)
	}
	for _, l := range [][]string{theirCaches, theirDevices, ourCaches, ourDevices} {
		slices.Sort(l)
	}
	if d := cmp.Diff(ourCaches, theirCaches); d != "" {
		t.Errorf("caches (-ReadHardware +lstopo):\n%s", d)
	}
	if d := cmp.Diff(ourDevices, theirDevices); d != "" {
		t.Errorf("PCI devices (-ReadHardware +lstopo):\n%s", d)
	}
	t.Logf("lstopo agrees on %d caches and %d PCI devices %q", len(ourCaches), len(ourDevices), ourDevices)
}

// On a one-node machine the node's free memory is the system's: /proc/meminfo's MemFree, within
// what a busy machine frees or takes between the two reads (2 % of its memory).
func TestReadHardwareLiveFreeMemory(t *testing.T) {
	topo := liveTopology(t)
	if len(topo.NUMANodes) != 1 {
		t.Skipf("this machine has %d NUMA nodes; the system's MemFree is the sum of theirs", len(topo.NUMANodes))
	}
	hw, err := ReadHardware("/sys", topo)
	if err != nil {
		t.Fatal(err)
	}
	if !hw.Memory[0].FreeKnown {
		t.Skip("this kernel has no NUMA support: sysfs has no free memory figure")
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	defer f.Close()
	var free uint64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "MemFree:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/meminfo MemFree %q: %v", v, err)
			}
			free = kb << 10
		}
	}
	m := hw.Memory[0]
	if diff := max(free, m.FreeBytes) - min(free, m.FreeBytes); diff > m.TotalBytes/50 {
		t.Errorf("node 0 has %d bytes free, /proc/meminfo says %d (of %d)", m.FreeBytes, free, m.TotalBytes)
	}
}
