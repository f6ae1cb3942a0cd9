package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"k8s.io/utils/cpuset"
)

// cpuRecord is what sysfs says about one online CPU.
type cpuRecord struct {
	id, socket, die, coreID int
	// siblings is thread_siblings_list restricted to online CPUs.
	siblings cpuset.CPUSet
	// l3 is the CPU's level-3 cache, or nil when it reports none.
	l3 *l3Record
}

// l3Record is one CPU's view of its level-3 cache.
type l3Record struct {
	// cpus is shared_cpu_list restricted to online CPUs.
	cpus cpuset.CPUSet
	// id is the cache's id attribute, or -1 when the kernel does not provide one.
	id   int
	size uint64
	// dir is the cache's indexM directory, for error messages.
	dir string
}

func cpuDir(s *sysfs, cpu int) string {
	return s.root + "/devices/system/cpu/cpu" + strconv.Itoa(cpu)
}

func readCPU(s *sysfs, cpu int, online cpuset.CPUSet) (cpuRecord, error) {
	dir := cpuDir(s, cpu)
	r := cpuRecord{id: cpu}
	var err error
	if r.socket, err = s.nonNegInt(dir + "/topology/physical_package_id"); err != nil {
		return r, err
	}
	if r.die, _, err = s.optionalNonNegInt(dir + "/topology/die_id"); err != nil {
		return r, err
	}
	if r.coreID, err = s.nonNegInt(dir + "/topology/core_id"); err != nil {
		return r, err
	}
	path := dir + "/topology/thread_siblings_list"
	if r.siblings, err = s.list(path); err != nil {
		return r, err
	}
	if !r.siblings.Contains(cpu) {
		return r, &FileError{Path: path, Want: "a list that includes the CPU itself", Err: fmt.Errorf("CPU %d is not in %q", cpu, r.siblings.String())}
	}
	r.siblings = r.siblings.Intersection(online)
	r.l3, err = readL3(s, dir, cpu, online)
	return r, err
}

// readL3 walks cache/index0, index1, ... until one is missing and returns the level-3 data or
// unified cache, if any.
func readL3(s *sysfs, dir string, cpu int, online cpuset.CPUSet) (*l3Record, error) {
	var found *l3Record
	for idx := 0; ; idx++ {
		idir := dir + "/cache/index" + strconv.Itoa(idx)
		level, err := s.nonNegInt(idir + "/level")
		if errors.Is(err, fs.ErrNotExist) {
			if there, serr := exists(idir); serr != nil || there {
				return nil, errors.Join(err, serr)
			}
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		if level != 3 {
			continue
		}
		data, err := s.read(idir+"/type", wantCacheType)
		if err != nil {
			return nil, err
		}
		typ, err := parseCacheType(data)
		if err != nil {
			return nil, &FileError{Path: idir + "/type", Want: wantCacheType, Err: err}
		}
		if typ == cacheInstruction {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: CPU %d has two level-3 data caches, %s and %s", ErrInconsistent, cpu, found.dir, idir)
		}
		if found, err = readL3Index(s, idir, cpu, online); err != nil {
			return nil, err
		}
	}
}

func readL3Index(s *sysfs, idir string, cpu int, online cpuset.CPUSet) (*l3Record, error) {
	rec := &l3Record{dir: idir, id: -1}
	shared, err := s.list(idir + "/shared_cpu_list")
	if err != nil {
		return nil, err
	}
	if !shared.Contains(cpu) {
		return nil, &FileError{Path: idir + "/shared_cpu_list", Want: "a list that includes the CPU itself",
			Err: fmt.Errorf("CPU %d is not in %q", cpu, shared.String())}
	}
	rec.cpus = shared.Intersection(online)
	data, err := s.read(idir+"/size", wantCacheSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if rec.size, err = parseCacheSize(data); err != nil {
			return nil, &FileError{Path: idir + "/size", Want: wantCacheSize, Err: err}
		}
	}
	id, ok, err := s.optionalNonNegInt(idir + "/id")
	if err != nil {
		return nil, err
	}
	if ok {
		rec.id = id
	}
	return rec, nil
}

// checkSiblings verifies that every CPU's thread_siblings_list names exactly the online CPUs with
// its (physical_package_id, die_id, core_id).
func checkSiblings(s *sysfs, records []cpuRecord) error {
	members := map[coreKey][]int{}
	for _, r := range records {
		k := coreKey{r.socket, r.die, r.coreID}
		members[k] = append(members[k], r.id)
	}
	sets := make(map[coreKey]cpuset.CPUSet, len(members))
	for k, ids := range members {
		sets[k] = cpuset.New(ids...)
	}
	for _, r := range records {
		k := coreKey{r.socket, r.die, r.coreID}
		if want := sets[k]; !r.siblings.Equals(want) {
			return fmt.Errorf("%w: %s/topology/thread_siblings_list puts CPUs %q on CPU %d's core, but physical_package_id, die_id and core_id (%d, %d, %d) put CPUs %q there",
				ErrInconsistent, cpuDir(s, r.id), r.siblings.String(), r.id, k.socket, k.die, k.coreID, want.String())
		}
	}
	return nil
}

// groupL3 checks that the CPUs agree about who shares which level-3 cache and returns, per
// record, the key CPUSpec.L3 wants (the lowest CPU sharing the cache, or -1) and the cache sizes.
func groupL3(s *sysfs, records []cpuRecord) ([]int, map[int]uint64, error) {
	keys := make([]int, len(records))
	keyOf := map[int]int{} // CPU -> key
	groups := map[int]*l3Record{}
	var with, without = -1, -1
	for i, r := range records {
		if r.l3 == nil {
			keys[i], without = -1, r.id
			continue
		}
		with = r.id
		key := r.l3.cpus.List()[0]
		keys[i], keyOf[r.id] = key, key
		g, ok := groups[key]
		if !ok {
			groups[key] = r.l3
			continue
		}
		if !g.cpus.Equals(r.l3.cpus) || g.id != r.l3.id || g.size != r.l3.size {
			return nil, nil, fmt.Errorf("%w: %s (CPUs %q, id %d, %d bytes) and %s (CPUs %q, id %d, %d bytes) describe the same level-3 cache differently",
				ErrInconsistent, g.dir, g.cpus.String(), g.id, g.size, r.l3.dir, r.l3.cpus.String(), r.l3.id, r.l3.size)
		}
	}
	if with >= 0 && without >= 0 {
		return nil, nil, fmt.Errorf("%w: CPU %d reports a level-3 cache under %s/cache but CPU %d reports none",
			ErrInconsistent, with, cpuDir(s, with), without)
	}
	ids := map[int]int{}
	sizes := make(map[int]uint64, len(groups))
	for key, g := range groups {
		for _, cpu := range g.cpus.UnsortedList() {
			if keyOf[cpu] != key {
				return nil, nil, fmt.Errorf("%w: %s/shared_cpu_list includes CPU %d, whose own level-3 cache is shared by other CPUs",
					ErrInconsistent, g.dir, cpu)
			}
		}
		if other, dup := ids[g.id]; dup && g.id >= 0 {
			return nil, nil, fmt.Errorf("%w: level-3 caches of CPUs %d and %d both have id %d", ErrInconsistent, other, key, g.id)
		}
		ids[g.id] = key
		sizes[key] = g.size
	}
	return keys, sizes, nil
}
