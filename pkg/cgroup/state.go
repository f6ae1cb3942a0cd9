package cgroup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// State is what a container's cgroup carries now.
type State struct {
	Container ContainerRef
	Version   Version
	// CPUs and Mems are the container cgroup's own settings; on v2 empty means "inherit".
	CPUs, Mems cpuset.CPUSet
	// EffectiveCPUs and EffectiveMems are what its processes may really use.
	EffectiveCPUs, EffectiveMems cpuset.CPUSet
	CPUQuota                     Quota
	// CPUShares is set on v1, CPUWeight on v2.
	CPUShares uint64
	CPUWeight uint64
	// MemoryLimit is in bytes, or MemoryUnlimited.
	MemoryLimit int64
	// Partitions are the cgroups from kubepods down to the container that are cpuset
	// partitions (v2 only); finegrain leaves them alone.
	Partitions []Partition
}

// Partition is a v2 cgroup whose cpuset.cpus.partition is not "member".
type Partition struct {
	Dir string
	// Mode is the file's content, e.g. "root", "isolated" or "root invalid (...)".
	Mode string
}

// Read returns what a container's cgroup carries now.
func (f *FS) Read(ref ContainerRef) (State, error) {
	if err := ref.Validate(); err != nil {
		return State{}, fmt.Errorf("container cgroup: %w", err)
	}
	v := f.layout.Mounts.Version
	s := State{Container: ref, Version: v}
	files := []string{fileCPUs, fileMems, fileV2EffCPUs, fileV2EffMems, fileCPUMax, fileWeight, fileMemMax}
	if v == V1 {
		files = []string{fileCPUs, fileMems, fileV1EffCPUs, fileV1EffMems, filePeriod, fileQuota, fileShares, fileMemLimit}
	}
	for _, file := range files {
		c := controllerOf(file)
		dir := f.layout.containerDir(c, ref)
		val, err := f.read(ref, c, dir, file)
		if err != nil {
			return State{}, err
		}
		if err := s.set(file, val); err != nil {
			return State{}, fmt.Errorf("container %s: %s in %s: %w", ref, file, dir, err)
		}
	}
	if v == V2 {
		for _, dir := range f.layout.chain(CPUSet, ref) {
			mode, err := f.read(ref, CPUSet, dir, filePartition)
			if errors.Is(err, ErrControllerMissing) {
				continue
			}
			if err != nil {
				return State{}, err
			}
			if mode != partitionMember {
				s.Partitions = append(s.Partitions, Partition{Dir: dir, Mode: mode})
			}
		}
	}
	return s, nil
}

// set stores one file's canonical content.
func (s *State) set(file, val string) error {
	var err error
	switch file {
	case fileCPUs:
		s.CPUs, err = cpulist.Parse(val)
	case fileMems:
		s.Mems, err = cpulist.Parse(val)
	case fileV1EffCPUs, fileV2EffCPUs:
		s.EffectiveCPUs, err = cpulist.Parse(val)
	case fileV1EffMems, fileV2EffMems:
		s.EffectiveMems, err = cpulist.Parse(val)
	case filePeriod:
		s.CPUQuota.PeriodUS, err = strconv.ParseUint(val, 10, 64)
	case fileQuota:
		s.CPUQuota.QuotaUS, err = strconv.ParseInt(val, 10, 64)
	case fileCPUMax:
		err = parseCPUMax(val, &s.CPUQuota)
	case fileShares:
		s.CPUShares, err = strconv.ParseUint(val, 10, 64)
	case fileWeight:
		s.CPUWeight, err = strconv.ParseUint(val, 10, 64)
	case fileMemLimit:
		s.MemoryLimit, err = strconv.ParseInt(val, 10, 64)
	case fileMemMax:
		s.MemoryLimit, err = parseMemMax(val)
	}
	return err
}

// parseCPUMax reads a canonical cpu.max ("max 100000" or "50000 100000").
func parseCPUMax(s string, q *Quota) error {
	quota, period, _ := strings.Cut(s, " ")
	p, err := strconv.ParseUint(period, 10, 64)
	if err != nil {
		return err
	}
	q.PeriodUS, q.QuotaUS = p, QuotaUnlimited
	if quota != unlimitedV2String {
		q.QuotaUS, err = strconv.ParseInt(quota, 10, 64)
	}
	return err
}

// parseMemMax reads a canonical memory.max ("max" or bytes).
func parseMemMax(s string) (int64, error) {
	if s == unlimitedV2String {
		return MemoryUnlimited, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
