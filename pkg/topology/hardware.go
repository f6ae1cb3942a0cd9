package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// Hardware is what `lstopo` and `numactl -H` show of a host beyond the Topology that finegrain
// schedules onto: every CPU cache level, each NUMA node's free memory, and the PCI devices an HPC
// job cares about (network adapters, GPUs, accelerators, storage) with their NUMA node. Unlike a
// Topology it is a reading at one moment (free memory changes), and nothing in finegrain decides
// on it; `nodeagent topology` prints it.
type Hardware struct {
	// Caches are the host's cache instances, by level, type and lowest CPU.
	Caches []Cache
	// Memory is each NUMA node's memory, in NUMANodes order.
	Memory []NodeMemory
	// PCIDevices are the devices of the kinds PCIKind names, by address.
	PCIDevices []PCIDevice
}

// Cache is one cache instance and the CPUs sharing it.
type Cache struct {
	Level int
	// Type is "Data", "Instruction" or "Unified", as sysfs names it.
	Type string
	// SizeBytes is 0 when sysfs does not report the size.
	SizeBytes uint64
	// CPUs are the online CPUs sharing the instance.
	CPUs cpuset.CPUSet
}

// Name is the cache's name as lscpu prints it: L1d, L1i, L2, L3.
func (c Cache) Name() string {
	switch c.Type {
	case "Data":
		return fmt.Sprintf("L%dd", c.Level)
	case "Instruction":
		return fmt.Sprintf("L%di", c.Level)
	}
	return fmt.Sprintf("L%d", c.Level)
}

// NodeMemory is a NUMA node's memory as its meminfo says: MemTotal and MemFree.
type NodeMemory struct {
	NUMANode   NUMAID
	TotalBytes uint64
	// FreeBytes is the node's MemFree. FreeKnown is false on a kernel without NUMA support (no
	// node directory), where sysfs says nothing about free memory.
	FreeBytes uint64
	FreeKnown bool
}

// PCIKind is what a PCI device is, from its class code.
type PCIKind string

// The kinds of PCI device Hardware lists; every other class (bridges, USB, ...) is left out.
const (
	PCINetwork     PCIKind = "network"     // class 0x02: Ethernet, InfiniBand, ...
	PCIGPU         PCIKind = "gpu"         // class 0x03: display and 3D controllers
	PCIAccelerator PCIKind = "accelerator" // class 0x12: processing accelerators
	PCIStorage     PCIKind = "storage"     // class 0x01: NVMe, SATA, ...
)

// pciKind maps a class code (0xCCSSPP) to a kind; ok is false for a class Hardware leaves out.
func pciKind(class uint64) (PCIKind, bool) {
	switch class >> 16 {
	case 0x01:
		return PCIStorage, true
	case 0x02:
		return PCINetwork, true
	case 0x03:
		return PCIGPU, true
	case 0x12:
		return PCIAccelerator, true
	}
	return "", false
}

// PCIDevice is one PCI function.
type PCIDevice struct {
	// Address is the function's domain:bus:device.function ("0000:3b:00.0").
	Address string
	Kind    PCIKind
	// Class, Vendor and Device are the IDs sysfs prints (0x020000, 0x15b3, 0x1017).
	Class          uint32
	Vendor, Device uint16
	// NUMANode is the node the device is attached to, or NoNUMA when the firmware does not say
	// (numa_node -1: single-node hosts and most virtual machines).
	NUMANode NUMAID
	// Interfaces are the network interfaces of a network device, with their operational state
	// ("eth0 up").
	Interfaces []NetInterface
}

// NetInterface is a network interface of a PCI device.
type NetInterface struct {
	Name string
	// OperState is the interface's operstate: up, down, unknown, ...
	OperState string
}

// ReadHardware reads a host's caches, NUMA memory and PCI devices from the sysfs at sysfsRoot,
// where Discover read t. It reads these files:
//
//	devices/system/cpu/cpuN/cache/indexM/{level,type,shared_cpu_list,size} of an online CPU N
//	  whose indexM no lower CPU's shared_cpu_list named (size is optional)
//	devices/system/node/nodeN/meminfo of every node of t
//	bus/pci/devices/ADDR/class of every device, and {vendor,device,numa_node} of the kinds listed,
//	bus/pci/devices/ADDR/net/IF/operstate and bus/pci/devices/ADDR/virtioK/net/IF/operstate
//
// A host without cache directories has no caches, one without bus/pci (a container's sysfs
// without it, a fixture) no PCI devices; every other missing or malformed file is a *FileError,
// and a device on a NUMA node t does not have wraps ErrInconsistent.
func ReadHardware(sysfsRoot string, t *Topology) (Hardware, error) {
	return readHardware(newSysfs(filepath.Clean(sysfsRoot)), t)
}

func readHardware(s *sysfs, t *Topology) (Hardware, error) {
	var hw Hardware
	var err error
	if hw.Caches, err = readCaches(s, t.OnlineCPUs); err != nil {
		return Hardware{}, err
	}
	if hw.Memory, err = readNodeMemory(s, t); err != nil {
		return Hardware{}, err
	}
	if hw.PCIDevices, err = readPCIDevices(s, t); err != nil {
		return Hardware{}, err
	}
	return hw, nil
}

// readCaches reads every cache instance once: CPUs are visited in ascending order, and a CPU's
// indexM is read only when no lower CPU's indexM listed it in shared_cpu_list (the kernel numbers
// a CPU's caches the same way on every CPU: index0 L1d, index1 L1i, ...).
func readCaches(s *sysfs, online cpuset.CPUSet) ([]Cache, error) {
	var caches []Cache
	covered := map[int]cpuset.CPUSet{} // index → CPUs an instance already lists
	for _, cpu := range online.List() {
		for idx := 0; ; idx++ {
			if covered[idx].Contains(cpu) {
				continue
			}
			idir := cpuDir(s, cpu) + "/cache/index" + strconv.Itoa(idx)
			c, ok, err := readCache(s, idir, online)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if !c.CPUs.Contains(cpu) {
				return nil, &FileError{Path: idir + "/shared_cpu_list", Want: "a list that includes the CPU itself", Err: fmt.Errorf("CPU %d is not in it", cpu)}
			}
			covered[idx] = covered[idx].Union(c.CPUs)
			caches = append(caches, c)
		}
	}
	slices.SortFunc(caches, func(a, b Cache) int {
		if a.Level != b.Level {
			return a.Level - b.Level
		}
		if a.Type != b.Type {
			return strings.Compare(a.Type, b.Type)
		}
		return a.CPUs.List()[0] - b.CPUs.List()[0]
	})
	return caches, nil
}

// readCache reads one cache index directory; ok is false when it does not exist.
func readCache(s *sysfs, idir string, online cpuset.CPUSet) (Cache, bool, error) {
	level, err := s.nonNegInt(idir + "/level")
	if errors.Is(err, fs.ErrNotExist) {
		if there, serr := exists(idir); serr != nil || there {
			return Cache{}, false, errors.Join(err, serr)
		}
		return Cache{}, false, nil
	}
	if err != nil {
		return Cache{}, false, err
	}
	c := Cache{Level: level}
	data, err := s.read(idir+"/type", wantCacheType)
	if err != nil {
		return Cache{}, false, err
	}
	if _, err := parseCacheType(data); err != nil {
		return Cache{}, false, &FileError{Path: idir + "/type", Want: wantCacheType, Err: err}
	}
	c.Type = strings.TrimSpace(string(data))
	shared, err := s.list(idir + "/shared_cpu_list")
	if err != nil {
		return Cache{}, false, err
	}
	c.CPUs = shared.Intersection(online)
	data, err = s.read(idir+"/size", wantCacheSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Cache{}, false, err
	default:
		if c.SizeBytes, err = parseCacheSize(data); err != nil {
			return Cache{}, false, &FileError{Path: idir + "/size", Want: wantCacheSize, Err: err}
		}
	}
	return c, true, nil
}

// readNodeMemory reads MemTotal and MemFree of every NUMA node of t. Without a node directory
// (a kernel without NUMA support) the one node has t's memory and no free figure.
func readNodeMemory(s *sysfs, t *Topology) ([]NodeMemory, error) {
	dir := s.root + "/devices/system/node"
	ok, err := exists(dir)
	if err != nil {
		return nil, err
	}
	out := make([]NodeMemory, len(t.NUMANodes))
	for i, n := range t.NUMANodes {
		out[i] = NodeMemory{NUMANode: n.ID, TotalBytes: n.MemoryBytes}
		if !ok {
			continue
		}
		path := fmt.Sprintf("%s/node%d/meminfo", dir, n.ID)
		data, err := s.read(path, wantMeminfo)
		if err != nil {
			return nil, err
		}
		if out[i].TotalBytes, err = parseNodeMeminfo(data, int(n.ID), "MemTotal"); err != nil {
			return nil, &FileError{Path: path, Want: fmt.Sprintf("a \"Node %d MemTotal: <n> kB\" line", n.ID), Err: err}
		}
		if out[i].FreeBytes, err = parseNodeMeminfo(data, int(n.ID), "MemFree"); err != nil {
			return nil, &FileError{Path: path, Want: fmt.Sprintf("a \"Node %d MemFree: <n> kB\" line", n.ID), Err: err}
		}
		out[i].FreeKnown = true
	}
	return out, nil
}

// readPCIDevices reads the devices under bus/pci/devices whose class is one of the PCIKinds.
func readPCIDevices(s *sysfs, t *Topology) ([]PCIDevice, error) {
	dir := s.root + "/bus/pci/devices"
	ok, err := exists(dir)
	if err != nil || !ok {
		return nil, err
	}
	addrs, err := readDirNames(dir)
	if err != nil {
		return nil, err
	}
	slices.Sort(addrs)
	var out []PCIDevice
	for _, addr := range addrs {
		d, ok, err := readPCIDevice(s, dir+"/"+addr, t)
		if err != nil {
			return nil, err
		}
		if ok {
			d.Address = addr
			out = append(out, d)
		}
	}
	return out, nil
}

// readPCIDevice reads one device; ok is false for a class Hardware leaves out.
func readPCIDevice(s *sysfs, ddir string, t *Topology) (PCIDevice, bool, error) {
	class, err := s.hex(ddir + "/class")
	if err != nil {
		return PCIDevice{}, false, err
	}
	kind, ok := pciKind(class)
	if !ok {
		return PCIDevice{}, false, nil
	}
	d := PCIDevice{Kind: kind, Class: uint32(class)}
	vendor, err := s.hex(ddir + "/vendor")
	if err != nil {
		return PCIDevice{}, false, err
	}
	device, err := s.hex(ddir + "/device")
	if err != nil {
		return PCIDevice{}, false, err
	}
	d.Vendor, d.Device = uint16(vendor), uint16(device)
	data, err := s.read(ddir+"/numa_node", wantNUMANode)
	if err != nil {
		return PCIDevice{}, false, err
	}
	node, err := parseIntFile(data)
	if err == nil && node < -1 {
		err = fmt.Errorf("%d is below -1", node)
	}
	if err != nil {
		return PCIDevice{}, false, &FileError{Path: ddir + "/numa_node", Want: wantNUMANode, Err: err}
	}
	d.NUMANode = NUMAID(node)
	if node >= 0 && t.NUMANodeIndex(d.NUMANode) < 0 {
		return PCIDevice{}, false, fmt.Errorf("%w: %s/numa_node names node %d, which is not online", ErrInconsistent, ddir, node)
	}
	if kind == PCINetwork {
		if d.Interfaces, err = readInterfaces(s, ddir); err != nil {
			return PCIDevice{}, false, err
		}
	}
	return d, true, nil
}

// readInterfaces lists a network device's interfaces: under its net directory, or under the net
// directory of its virtio device (virtio-net puts the interface one level down).
func readInterfaces(s *sysfs, ddir string) ([]NetInterface, error) {
	netDirs := []string{ddir + "/net"}
	children, err := readDirNames(ddir)
	if err != nil {
		return nil, err
	}
	slices.Sort(children)
	for _, c := range children {
		if strings.HasPrefix(c, "virtio") {
			netDirs = append(netDirs, ddir+"/"+c+"/net")
		}
	}
	var out []NetInterface
	for _, nd := range netDirs {
		ok, err := exists(nd)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		names, err := readDirNames(nd)
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		for _, name := range names {
			data, err := s.read(nd+"/"+name+"/operstate", wantOperState)
			if err != nil {
				return nil, err
			}
			state, err := content(data)
			if err != nil {
				return nil, &FileError{Path: nd + "/" + name + "/operstate", Want: wantOperState, Err: err}
			}
			out = append(out, NetInterface{Name: name, OperState: string(state)})
		}
	}
	return out, nil
}

// hex reads a file holding one hexadecimal number with its 0x prefix, as a PCI device's class,
// vendor and device.
func (s *sysfs) hex(path string) (uint64, error) {
	data, err := s.read(path, wantPCIHex)
	if err != nil {
		return 0, err
	}
	v, err := parsePCIHex(data)
	if err != nil {
		return 0, &FileError{Path: path, Want: wantPCIHex, Err: err}
	}
	return v, nil
}
