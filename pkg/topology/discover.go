package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// Discover reads the topology of the host whose sysfs is mounted at sysfsRoot: "/sys" on the host
// itself, the host's /sys mounted into a container, or a fixture laid out like it. It reads only
// these files (hack/capture-sysfs.sh copies exactly them):
//
//	devices/system/cpu/{online,offline,possible,present,isolated}
//	devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id,thread_siblings_list}
//	devices/system/cpu/cpuN/cache/indexM/level, and for a level-3 cache {type,shared_cpu_list,size,id}
//	  (only for the lowest online CPU of every L3 group: the others are placed by its shared_cpu_list)
//	devices/system/node/{online,possible,has_cpu,has_memory}
//	devices/system/node/nodeN/{cpulist,meminfo,distance}
//
// for every online CPU N and online NUMA node N. die_id (Linux ≥ 5.2), a cache's size and id are
// optional: without them a socket has one die, the size is 0 and caches are grouped by
// shared_cpu_list alone. A kernel without NUMA support has no devices/system/node; the host is
// then one NUMA node 0 whose memory is the sum of the online memory blocks in
// devices/system/memory (block_size_bytes, memoryN/online), or 0 when that directory is missing
// too. cpu/isolated may name offline CPUs (isolcpus= is fixed at boot); IsolatedCPUs keeps the
// online ones, the others are in OfflineCPUs.
//
// Every other missing, truncated or malformed file is an error naming the file and what it should
// hold (a *FileError), and files that contradict each other — thread_siblings_list against the
// (physical_package_id, die_id, core_id) grouping, a CPU in two nodes' cpulists, has_cpu against
// the cpulists — are an error wrapping ErrInconsistent. Discover never returns a partial topology.
func Discover(sysfsRoot string) (*Topology, error) {
	return discover(newSysfs(filepath.Clean(sysfsRoot)))
}

func discover(s *sysfs) (*Topology, error) {
	lists, err := readCPULists(s)
	if err != nil {
		return nil, err
	}
	nodes, nodeOf, err := readNUMA(s, lists.online)
	if err != nil {
		return nil, err
	}
	cpus := newCPUReader(s, lists.online)
	records := make([]cpuRecord, 0, lists.online.Size())
	for _, cpu := range lists.online.List() {
		rec, err := cpus.read(cpu)
		if err != nil {
			return nil, err
		}
		records = append(records, rec)
	}
	if err := checkSiblings(s, records); err != nil {
		return nil, err
	}
	spec := Spec{
		CPUs:        make([]CPUSpec, len(records)),
		Offline:     lists.offline,
		Isolated:    lists.isolated.Intersection(lists.online),
		NUMANodes:   nodes,
		L3SizeBytes: cpus.l3Sizes(),
	}
	for i, r := range records {
		spec.CPUs[i] = CPUSpec{ID: r.id, Socket: SocketID(r.socket), Die: r.die, KernelCoreID: r.coreID, NUMANode: nodeOf[r.id], L3: cpus.l3Key(r.id)}
	}
	t, err := New(spec)
	if err != nil {
		return nil, fmt.Errorf("topology read from %s: %w", s.root, err)
	}
	return t, nil
}

type cpuLists struct {
	online, offline, possible, present, isolated cpuset.CPUSet
}

func readCPULists(s *sysfs) (cpuLists, error) {
	dir := s.root + "/devices/system/cpu/"
	var l cpuLists
	for _, f := range []struct {
		name string
		dst  *cpuset.CPUSet
	}{{"online", &l.online}, {"offline", &l.offline}, {"possible", &l.possible}, {"present", &l.present}, {"isolated", &l.isolated}} {
		set, err := s.list(dir + f.name)
		if err != nil {
			return l, err
		}
		*f.dst = set
	}
	if l.online.IsEmpty() {
		return l, &FileError{Path: dir + "online", Want: "at least one online CPU", Err: errors.New("the list is empty")}
	}
	if err := subset(l.online, dir+"online", l.present, dir+"present"); err != nil {
		return l, err
	}
	if err := subset(l.present, dir+"present", l.possible, dir+"possible"); err != nil {
		return l, err
	}
	if both := l.online.Intersection(l.offline); !both.IsEmpty() {
		return l, fmt.Errorf("%w: CPUs %s are in both %s and %s", ErrInconsistent, both, dir+"online", dir+"offline")
	}
	if err := subset(l.possible, dir+"possible", l.online.Union(l.offline), dir+"{online,offline}"); err != nil {
		return l, err
	}
	return l, nil
}

// subset checks that a (read from aPath) is a subset of b (read from bPath).
func subset(a cpuset.CPUSet, aPath string, b cpuset.CPUSet, bPath string) error {
	if extra := a.Difference(b); !extra.IsEmpty() {
		return fmt.Errorf("%w: %s lists %s, which %s does not", ErrInconsistent, aPath, extra, bPath)
	}
	return nil
}

// readNUMA returns the online NUMA nodes and, indexed by CPU, the node of every online CPU:
//  1. a kernel without NUMA support (no node directory) has one node holding every CPU and all
//     memory;
//  2. the node lists (online, possible, has_cpu, has_memory) must agree with each other;
//  3. each online node's CPUs, memory and distances are read;
//  4. every online CPU must lie in exactly one node, and the nodes with CPUs must be has_cpu.
func readNUMA(s *sysfs, online cpuset.CPUSet) ([]NUMANodeSpec, []NUMAID, error) {
	nodeOf := make([]NUMAID, online.List()[online.Size()-1]+1)
	for i := range nodeOf {
		nodeOf[i] = NoNUMA
	}
	dir := s.root + "/devices/system/node"
	ok, err := exists(dir)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return singleNode(s, online, nodeOf)
	}
	lists, err := readNodeLists(s, dir)
	if err != nil {
		return nil, nil, err
	}
	ids := lists.online.List()
	nodes := make([]NUMANodeSpec, len(ids))
	withCPUs := make([]int, 0, len(ids))
	for i, id := range ids {
		hasCPUs, err := readNode(s, dir, id, len(ids), online, lists.hasMemory, &nodes[i], nodeOf)
		if err != nil {
			return nil, nil, err
		}
		if hasCPUs {
			withCPUs = append(withCPUs, id)
		}
	}
	for _, cpu := range online.List() {
		if nodeOf[cpu] < 0 {
			return nil, nil, fmt.Errorf("%w: CPU %d is online but in no online node's cpulist under %s", ErrInconsistent, cpu, dir)
		}
	}
	if got := cpuset.New(withCPUs...); !got.Equals(lists.hasCPU) {
		return nil, nil, fmt.Errorf("%w: %s/has_cpu is %q but the nodes' cpulists put online CPUs on nodes %q",
			ErrInconsistent, dir, lists.hasCPU.String(), got.String())
	}
	return nodes, nodeOf, nil
}

// singleNode is the one NUMA node of a kernel without NUMA support: every online CPU, and the
// memory the memory blocks hold.
func singleNode(s *sysfs, online cpuset.CPUSet, nodeOf []NUMAID) ([]NUMANodeSpec, []NUMAID, error) {
	mem, err := readBlockMemory(s)
	if err != nil {
		return nil, nil, err
	}
	for _, cpu := range online.UnsortedList() {
		nodeOf[cpu] = 0
	}
	return []NUMANodeSpec{{ID: 0, MemoryBytes: mem, Distances: []int{10}}}, nodeOf, nil
}

// nodeLists are the node directory's lists of nodes.
type nodeLists struct {
	online, possible, hasCPU, hasMemory cpuset.CPUSet
}

// readNodeLists reads the lists and checks that at least one node is online and that every list
// is a subset of the possible nodes.
func readNodeLists(s *sysfs, dir string) (nodeLists, error) {
	var l nodeLists
	for _, f := range []struct {
		name string
		dst  *cpuset.CPUSet
	}{{"online", &l.online}, {"possible", &l.possible}, {"has_cpu", &l.hasCPU}, {"has_memory", &l.hasMemory}} {
		var err error
		if *f.dst, err = s.list(dir + "/" + f.name); err != nil {
			return l, err
		}
	}
	if l.online.IsEmpty() {
		return l, &FileError{Path: dir + "/online", Want: "at least one online NUMA node", Err: errors.New("the list is empty")}
	}
	for _, c := range []struct {
		set  cpuset.CPUSet
		name string
	}{{l.online, "online"}, {l.hasCPU, "has_cpu"}, {l.hasMemory, "has_memory"}} {
		if err := subset(c.set, dir+"/"+c.name, l.possible, dir+"/possible"); err != nil {
			return l, err
		}
	}
	return l, nil
}

// readNode reads online node id of count into node: its online CPUs (recorded in nodeOf, each
// CPU in one node only), its memory (which must agree with has_memory) and its distances. It
// reports whether the node has online CPUs.
func readNode(s *sysfs, dir string, id, count int, online, hasMemory cpuset.CPUSet, node *NUMANodeSpec, nodeOf []NUMAID) (bool, error) {
	nd := dir + "/node" + strconv.Itoa(id) + "/"
	cpus, err := s.list(nd + "cpulist")
	if err != nil {
		return false, err
	}
	cpus = cpus.Intersection(online)
	for _, cpu := range cpus.UnsortedList() {
		if prev := nodeOf[cpu]; prev >= 0 {
			return false, fmt.Errorf("%w: CPU %d is in both %s/node%d/cpulist and %scpulist", ErrInconsistent, cpu, dir, prev, nd)
		}
		nodeOf[cpu] = NUMAID(id)
	}
	node.ID = NUMAID(id)
	if node.MemoryBytes, err = readMemTotal(s, nd+"meminfo", id); err != nil {
		return false, err
	}
	if node.MemoryBytes > 0 != hasMemory.Contains(id) {
		return false, fmt.Errorf("%w: %smeminfo says MemTotal is %d bytes but %s/has_memory is %q",
			ErrInconsistent, nd, node.MemoryBytes, dir, hasMemory.String())
	}
	if node.Distances, err = readDistances(s, nd+"distance", count); err != nil {
		return false, err
	}
	return !cpus.IsEmpty(), nil
}

func readMemTotal(s *sysfs, path string, node int) (uint64, error) {
	data, err := s.read(path, wantMeminfo)
	if err != nil {
		return 0, err
	}
	mem, err := parseNodeMemTotal(data, node)
	if err != nil {
		return 0, &FileError{Path: path, Want: fmt.Sprintf("a \"Node %d MemTotal: <n> kB\" line", node), Err: err}
	}
	return mem, nil
}

func readDistances(s *sysfs, path string, nodes int) ([]int, error) {
	data, err := s.read(path, wantDistances)
	if err != nil {
		return nil, err
	}
	row, err := parseDistances(data, nodes)
	if err != nil {
		return nil, &FileError{Path: path, Want: wantDistances, Err: err}
	}
	return row, nil
}

// readBlockMemory sums the online memory blocks of a kernel without NUMA support. This counts
// physical memory, slightly more than MemTotal (which leaves out what the kernel reserves).
func readBlockMemory(s *sysfs) (uint64, error) {
	dir := s.root + "/devices/system/memory"
	ok, err := exists(dir)
	if err != nil || !ok {
		return 0, err
	}
	data, err := s.read(dir+"/block_size_bytes", wantHex)
	if err != nil {
		return 0, err
	}
	blockSize, err := parseHexFile(data)
	if err != nil {
		return 0, &FileError{Path: dir + "/block_size_bytes", Want: wantHex, Err: err}
	}
	entries, err := readDirNames(dir)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, name := range entries {
		num, ok := strings.CutPrefix(name, "memory")
		if _, err := strconv.Atoi(num); !ok || err != nil {
			continue
		}
		path := dir + "/" + name + "/online"
		data, err := s.read(path, wantBlockOn)
		if err != nil {
			return 0, err
		}
		on, err := parseBlockOnline(data)
		if err != nil {
			return 0, &FileError{Path: path, Want: wantBlockOn, Err: err}
		}
		if on {
			total += blockSize
		}
	}
	return total, nil
}

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}
