package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"

	"k8s.io/utils/cpuset"
)

// cpuRecord is what sysfs says about one online CPU.
type cpuRecord struct {
	id, socket, die, coreID int
	// siblings is thread_siblings_list restricted to online CPUs, ascending.
	siblings []int
}

// l3Cache is one level-3 cache as its lowest online CPU (the group's leader) reports it.
type l3Cache struct {
	leader int
	// cpus is shared_cpu_list restricted to online CPUs, ascending.
	cpus []int
	// id is the cache's id attribute, or -1 when the kernel does not provide one.
	id   int
	size uint64
	// dir is the leader's cache/indexM directory, for error messages.
	dir string
}

// cpuReader reads the per-CPU files. Opening a file dominates discovery's cost, so it reads a CPU's
// caches only when no earlier CPU's shared_cpu_list already placed it: CPUs are visited in
// ascending order, so the first CPU met in every L3 group is its lowest online CPU, the group's
// leader, and only leaders' cache directories are read.
type cpuReader struct {
	s      *sysfs
	online []bool // indexed by CPU
	// l3Of maps a CPU to its index in caches, or -1 while unknown.
	l3Of   []int
	caches []l3Cache
	// noL3 is a leader that reported no level-3 cache, or -1.
	noL3 int
}

func newCPUReader(s *sysfs, online cpuset.CPUSet) *cpuReader {
	ids := online.List()
	r := &cpuReader{s: s, online: make([]bool, ids[len(ids)-1]+1), l3Of: filled(ids[len(ids)-1]+1, -1), noL3: -1}
	for _, id := range ids {
		r.online[id] = true
	}
	return r
}

func cpuDir(s *sysfs, cpu int) string {
	return s.root + "/devices/system/cpu/cpu" + strconv.Itoa(cpu)
}

// onlineIDs reads a list file and keeps the online CPUs.
func (r *cpuReader) onlineIDs(path string) ([]int, error) {
	data, err := r.s.read(path, wantList)
	if err != nil {
		return nil, err
	}
	set, err := parseListFile(data)
	if err != nil {
		return nil, &FileError{Path: path, Want: wantList, Err: err}
	}
	return slices.DeleteFunc(set.List(), func(id int) bool { return id >= len(r.online) || !r.online[id] }), nil
}

func (r *cpuReader) read(cpu int) (cpuRecord, error) {
	s := r.s
	dir := cpuDir(s, cpu)
	rec := cpuRecord{id: cpu}
	var err error
	if rec.socket, err = s.nonNegInt(dir + "/topology/physical_package_id"); err != nil {
		return rec, err
	}
	if rec.die, _, err = s.optionalNonNegInt(dir + "/topology/die_id"); err != nil {
		return rec, err
	}
	if rec.coreID, err = s.nonNegInt(dir + "/topology/core_id"); err != nil {
		return rec, err
	}
	path := dir + "/topology/thread_siblings_list"
	if rec.siblings, err = r.onlineIDs(path); err != nil {
		return rec, err
	}
	if _, found := slices.BinarySearch(rec.siblings, cpu); !found {
		return rec, &FileError{Path: path, Want: "a list that includes the CPU itself", Err: fmt.Errorf("CPU %d is not in it", cpu)}
	}
	if r.l3Of[cpu] < 0 {
		err = r.readLeaderCaches(dir, cpu)
	}
	return rec, err
}

// readLeaderCaches walks cache/index0, index1, ... of a CPU no earlier CPU placed in an L3 group
// until an index is missing, and records the CPU's level-3 data or unified cache, if any.
func (r *cpuReader) readLeaderCaches(dir string, cpu int) error {
	s := r.s
	var found *l3Cache
	for idx := 0; ; idx++ {
		idir := dir + "/cache/index" + strconv.Itoa(idx)
		level, err := s.nonNegInt(idir + "/level")
		if errors.Is(err, fs.ErrNotExist) {
			if there, serr := exists(idir); serr != nil || there {
				return errors.Join(err, serr)
			}
			break
		}
		if err != nil {
			return err
		}
		if level != 3 {
			continue
		}
		data, err := s.read(idir+"/type", wantCacheType)
		if err != nil {
			return err
		}
		typ, err := parseCacheType(data)
		if err != nil {
			return &FileError{Path: idir + "/type", Want: wantCacheType, Err: err}
		}
		if typ == cacheInstruction {
			continue
		}
		if found != nil {
			return fmt.Errorf("%w: CPU %d has two level-3 data caches, %s and %s", ErrInconsistent, cpu, found.dir, idir)
		}
		if found, err = r.readL3Index(idir, cpu); err != nil {
			return err
		}
	}
	return r.addLeader(cpu, found)
}

func (r *cpuReader) readL3Index(idir string, cpu int) (*l3Cache, error) {
	s := r.s
	c := &l3Cache{leader: cpu, dir: idir, id: -1}
	path := idir + "/shared_cpu_list"
	var err error
	if c.cpus, err = r.onlineIDs(path); err != nil {
		return nil, err
	}
	if _, found := slices.BinarySearch(c.cpus, cpu); !found {
		return nil, &FileError{Path: path, Want: "a list that includes the CPU itself", Err: fmt.Errorf("CPU %d is not in it", cpu)}
	}
	data, err := s.read(idir+"/size", wantCacheSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if c.size, err = parseCacheSize(data); err != nil {
			return nil, &FileError{Path: idir + "/size", Want: wantCacheSize, Err: err}
		}
	}
	id, ok, err := s.optionalNonNegInt(idir + "/id")
	if err != nil {
		return nil, err
	}
	if ok {
		c.id = id
	}
	return c, nil
}

// addLeader records a leader's L3 cache (nil for none) and places the CPUs sharing it.
func (r *cpuReader) addLeader(cpu int, c *l3Cache) error {
	if c == nil {
		if len(r.caches) > 0 {
			return r.mixedL3(r.caches[0].leader, cpu)
		}
		r.noL3 = cpu
		return nil
	}
	if r.noL3 >= 0 {
		return r.mixedL3(cpu, r.noL3)
	}
	for _, other := range c.cpus {
		if g := r.l3Of[other]; g >= 0 {
			return fmt.Errorf("%w: %s/shared_cpu_list puts CPU %d in CPU %d's level-3 cache, but %s/shared_cpu_list already put it in CPU %d's",
				ErrInconsistent, c.dir, other, cpu, r.caches[g].dir, r.caches[g].leader)
		}
	}
	if c.id >= 0 {
		for _, prev := range r.caches {
			if prev.id == c.id {
				return fmt.Errorf("%w: %s and %s are different level-3 caches with the same id %d", ErrInconsistent, prev.dir, c.dir, c.id)
			}
		}
	}
	for _, other := range c.cpus {
		r.l3Of[other] = len(r.caches)
	}
	r.caches = append(r.caches, *c)
	return nil
}

func (r *cpuReader) mixedL3(with, without int) error {
	return fmt.Errorf("%w: CPU %d reports a level-3 cache under %s/cache but CPU %d reports none under %s/cache",
		ErrInconsistent, with, cpuDir(r.s, with), without, cpuDir(r.s, without))
}

// l3Key is the CPUSpec.L3 key of a CPU: its group's leader, or -1.
func (r *cpuReader) l3Key(cpu int) int {
	if g := r.l3Of[cpu]; g >= 0 {
		return r.caches[g].leader
	}
	return -1
}

// l3Sizes maps every group's key to its cache size.
func (r *cpuReader) l3Sizes() map[int]uint64 {
	sizes := make(map[int]uint64, len(r.caches))
	for _, c := range r.caches {
		sizes[c.leader] = c.size
	}
	return sizes
}

// checkSiblings verifies that every CPU's thread_siblings_list names exactly the online CPUs with
// its (physical_package_id, die_id, core_id).
func checkSiblings(s *sysfs, records []cpuRecord) error {
	members := map[coreKey][]int{}
	for _, r := range records { // ascending CPU order, so member lists come out sorted
		k := coreKey{SocketID(r.socket), r.die, r.coreID}
		members[k] = append(members[k], r.id)
	}
	for _, r := range records {
		k := coreKey{SocketID(r.socket), r.die, r.coreID}
		if want := members[k]; !slices.Equal(r.siblings, want) {
			return fmt.Errorf("%w: %s/topology/thread_siblings_list puts CPUs %q on CPU %d's core, but physical_package_id, die_id and core_id (%d, %d, %d) put CPUs %q there",
				ErrInconsistent, cpuDir(s, r.id), cpuset.New(r.siblings...).String(), r.id, k.socket, k.die, k.coreID, cpuset.New(want...).String())
		}
	}
	return nil
}
