package topology

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// HostView is the JSON form of `nodeagent topology -o json`: the Topology's View and, beside its
// fields, the Hardware's. It decodes as a View (and so as a Topology), which ignores the rest.
type HostView struct {
	View
	HardwareView
}

// HardwareView is the public JSON form of a Hardware reading; add fields, never rename or remove
// one.
type HardwareView struct {
	Caches     []CacheView      `json:"caches"`
	NUMAMemory []NodeMemoryView `json:"numaMemory"`
	PCIDevices []PCIDeviceView  `json:"pciDevices"`
}

// CacheView is one cache instance.
type CacheView struct {
	// Name is lscpu's: L1d, L1i, L2, L3.
	Name      string `json:"name"`
	Level     int    `json:"level"`
	Type      string `json:"type"`
	SizeBytes uint64 `json:"sizeBytes"`
	CPUs      string `json:"cpus"`
}

// NodeMemoryView is a NUMA node's memory, as `numactl -H` shows it.
type NodeMemoryView struct {
	NUMANode   int    `json:"numaNode"`
	TotalBytes uint64 `json:"totalBytes"`
	// FreeBytes is absent on a kernel without NUMA support.
	FreeBytes *uint64 `json:"freeBytes,omitempty"`
}

// PCIDeviceView is one PCI device; the IDs are hexadecimal as sysfs and lspci print them.
type PCIDeviceView struct {
	Address string `json:"address"`
	Kind    string `json:"kind"`
	Class   string `json:"class"`
	Vendor  string `json:"vendor"`
	Device  string `json:"device"`
	// NUMANode is -1 when the firmware does not say.
	NUMANode   int                `json:"numaNode"`
	Interfaces []NetInterfaceView `json:"interfaces,omitempty"`
}

// NetInterfaceView is a network interface of a PCI device.
type NetInterfaceView struct {
	Name      string `json:"name"`
	OperState string `json:"operState"`
}

// View returns the reading's public JSON form.
func (h Hardware) View() HardwareView {
	v := HardwareView{
		Caches:     make([]CacheView, len(h.Caches)),
		NUMAMemory: make([]NodeMemoryView, len(h.Memory)),
		PCIDevices: make([]PCIDeviceView, len(h.PCIDevices)),
	}
	for i, c := range h.Caches {
		v.Caches[i] = CacheView{Name: c.Name(), Level: c.Level, Type: c.Type, SizeBytes: c.SizeBytes, CPUs: c.CPUs.String()}
	}
	for i, m := range h.Memory {
		v.NUMAMemory[i] = NodeMemoryView{NUMANode: int(m.NUMANode), TotalBytes: m.TotalBytes}
		if m.FreeKnown {
			free := m.FreeBytes
			v.NUMAMemory[i].FreeBytes = &free
		}
	}
	for i, d := range h.PCIDevices {
		v.PCIDevices[i] = PCIDeviceView{Address: d.Address, Kind: string(d.Kind), Class: fmt.Sprintf("0x%06x", d.Class),
			Vendor: fmt.Sprintf("0x%04x", d.Vendor), Device: fmt.Sprintf("0x%04x", d.Device), NUMANode: int(d.NUMANode)}
		for _, n := range d.Interfaces {
			v.PCIDevices[i].Interfaces = append(v.PCIDevices[i].Interfaces, NetInterfaceView(n))
		}
	}
	return v
}

// WriteHardwareTable prints what lscpu's cache summary, `numactl -H` and lstopo's I/O branch
// show: the caches by kind, each NUMA node's size and free memory, the node distance matrix, and
// the PCI devices grouped by NUMA node.
func WriteHardwareTable(w io.Writer, t *Topology, h Hardware) error {
	bw := bufio.NewWriter(w)
	writeCaches(bw, h.Caches)
	bw.WriteString("NUMA memory:\n")
	for _, m := range h.Memory {
		free := "unknown (no NUMA support in the kernel)"
		if m.FreeKnown {
			free = formatBytes(m.FreeBytes)
		}
		fmt.Fprintf(bw, "  node %d size: %s free: %s\n", m.NUMANode, formatBytes(m.TotalBytes), free)
	}
	writeDistances(bw, t)
	writePCI(bw, t, h.PCIDevices)
	return bw.Flush()
}

// writeCaches prints one line per cache kind, size and sharing: "L2: 1.0 MiB × 36 (1 CPU each)".
func writeCaches(bw *bufio.Writer, caches []Cache) {
	if len(caches) == 0 {
		bw.WriteString("Caches: none reported\n")
		return
	}
	bw.WriteString("Caches:\n")
	type kind struct {
		name   string
		size   uint64
		shared int
	}
	var order []kind
	count := map[kind]int{}
	for _, c := range caches {
		k := kind{c.Name(), c.SizeBytes, c.CPUs.Size()}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	for _, k := range order {
		size := "size unknown"
		if k.size > 0 {
			size = formatBytes(k.size)
		}
		fmt.Fprintf(bw, "  %s: %s × %d (%s each)\n", k.name, size, count[k], plural(k.shared, "CPU"))
	}
}

// writeDistances prints the SLIT table as `numactl -H` does.
func writeDistances(bw *bufio.Writer, t *Topology) {
	bw.WriteString("node distances:\nnode ")
	for _, n := range t.NUMANodes {
		fmt.Fprintf(bw, "%4d", n.ID)
	}
	bw.WriteByte('\n')
	for _, from := range t.NUMANodes {
		fmt.Fprintf(bw, "%4d:", from.ID)
		for _, to := range t.NUMANodes {
			fmt.Fprintf(bw, "%4d", t.Distance(from.ID, to.ID))
		}
		bw.WriteByte('\n')
	}
}

// writePCI prints the devices under their NUMA node, those without one last.
func writePCI(bw *bufio.Writer, t *Topology, devices []PCIDevice) {
	if len(devices) == 0 {
		bw.WriteString("PCI devices: none (network, GPU, accelerator or storage)\n")
		return
	}
	bw.WriteString("PCI devices:\n")
	groups := make([]NUMAID, 0, len(t.NUMANodes)+1)
	for _, n := range t.NUMANodes {
		groups = append(groups, n.ID)
	}
	for _, g := range append(groups, NoNUMA) {
		header := false
		for _, d := range devices {
			if d.NUMANode != g {
				continue
			}
			if !header {
				if g == NoNUMA {
					bw.WriteString("  no NUMA node (the firmware does not say):\n")
				} else {
					fmt.Fprintf(bw, "  NUMA node %d:\n", g)
				}
				header = true
			}
			fmt.Fprintf(bw, "    %s %s %04x:%04x (class 0x%06x)%s\n", d.Address, d.Kind, d.Vendor, d.Device, d.Class, interfaces(d.Interfaces))
		}
	}
}

// interfaces renders a device's interfaces as " eth0 (up), eth1 (down)".
func interfaces(list []NetInterface) string {
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, len(list))
	for i, n := range list {
		parts[i] = fmt.Sprintf("%s (%s)", n.Name, n.OperState)
	}
	return " " + strings.Join(parts, ", ")
}
