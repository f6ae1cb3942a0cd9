package cgroup

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

const (
	// QuotaUnlimited as Quota.QuotaUS removes the CPU bandwidth limit.
	QuotaUnlimited int64 = -1
	// MemoryUnlimited as Resources.MemoryLimit removes the memory limit.
	MemoryUnlimited int64 = -1
)

// Kernel bounds for the values (kernel/sched/core.c, include/linux/sched.h).
const (
	minPeriodUS = 1000
	maxPeriodUS = 1000000
	minQuotaUS  = 1000
	maxQuotaUS  = 1<<44 - 1
	minShares   = 2
	maxShares   = 262144
)

// The interface files finegrain writes or reads.
const (
	fileCPUs          = "cpuset.cpus"
	fileMems          = "cpuset.mems"
	fileMemMigrate    = "cpuset.memory_migrate"
	fileV1EffCPUs     = "cpuset.effective_cpus"
	fileV1EffMems     = "cpuset.effective_mems"
	fileV2EffCPUs     = "cpuset.cpus.effective"
	fileV2EffMems     = "cpuset.mems.effective"
	filePartition     = "cpuset.cpus.partition"
	filePeriod        = "cpu.cfs_period_us"
	fileQuota         = "cpu.cfs_quota_us"
	fileShares        = "cpu.shares"
	fileCPUMax        = "cpu.max"
	fileWeight        = "cpu.weight"
	fileMemLimit      = "memory.limit_in_bytes"
	fileMemMax        = "memory.max"
	fileProcs         = "cgroup.procs"
	partitionMember   = "member"
	unlimitedV2String = "max"
)

// Quota is a CFS bandwidth limit: QuotaUS of CPU time per PeriodUS of wall time. The zero
// value leaves the limit unchanged.
type Quota struct {
	// QuotaUS is the CPU time in microseconds per period, or QuotaUnlimited.
	QuotaUS int64
	// PeriodUS is the period in microseconds (1000 to 1000000); 0 leaves quota and period alone.
	PeriodUS uint64
}

// Resources are the values a container's cgroup should carry. Every zero field means "leave
// unchanged": an empty cpuset is never a valid value for a running container.
type Resources struct {
	CPUs cpuset.CPUSet
	// Mems are memory (NUMA) node IDs, in the same list format.
	Mems     cpuset.CPUSet
	CPUQuota Quota
	// CPUShares are cgroup v1 shares (2 to 262144); on cgroup v2 they are converted to cpu.weight
	// the way runc converts a container's shares.
	CPUShares uint64
	// MemoryLimit is in bytes (at least one page), or MemoryUnlimited. The kernel rounds it
	// down to a whole page. Lowering it below the container's usage makes the kernel reclaim and,
	// failing that, OOM-kill (v2) or refuse with EBUSY (v1): callers decide whether that is wanted.
	MemoryLimit int64
	// MigrateMemory makes the pages the container's processes already hold follow its
	// cpuset.mems when they change. cgroup v1 leaves them where they are unless the cgroup's
	// cpuset.memory_migrate is 1 when mems is written, so on v1 it is set to 1 on the container's
	// cgroup (and its sub-cgroups) before any cpuset.mems write. cgroup v2 always migrates (the
	// kernel sets the flag on every cpuset of the unified hierarchy), so on v2 it writes nothing.
	MigrateMemory bool
}

// Exclusive returns the values of an exclusive pin: cpus and mems, with the pages the container
// already holds moved to mems (a container pinned after it started may have allocated on any
// node).
func Exclusive(cpus, mems cpuset.CPUSet) Resources {
	return Resources{CPUs: cpus, Mems: mems, MigrateMemory: true}
}

// Value is one interface file and the content it should hold, in the kernel's own spelling so
// that it compares equal to what the file reads back.
type Value struct {
	Controller Controller
	File       string
	Data       string
}

// Validate checks every set field against the kernel's bounds.
func (r Resources) Validate() error {
	q := r.CPUQuota
	switch {
	case q.PeriodUS == 0 && q.QuotaUS != 0:
		return fmt.Errorf("CPU quota %d µs without a period: set PeriodUS too", q.QuotaUS)
	case q.PeriodUS != 0 && (q.PeriodUS < minPeriodUS || q.PeriodUS > maxPeriodUS):
		return fmt.Errorf("CPU period %d µs: want %d to %d", q.PeriodUS, minPeriodUS, maxPeriodUS)
	case q.PeriodUS != 0 && q.QuotaUS != QuotaUnlimited && (q.QuotaUS < minQuotaUS || q.QuotaUS > maxQuotaUS):
		return fmt.Errorf("CPU quota %d µs: want %d to %d, or QuotaUnlimited", q.QuotaUS, minQuotaUS, int64(maxQuotaUS))
	case r.CPUShares != 0 && (r.CPUShares < minShares || r.CPUShares > maxShares):
		return fmt.Errorf("CPU shares %d: want %d to %d", r.CPUShares, minShares, maxShares)
	case r.MemoryLimit != 0 && r.MemoryLimit != MemoryUnlimited && r.MemoryLimit < int64(os.Getpagesize()):
		return fmt.Errorf("memory limit %d bytes: want at least one page (%d bytes), or MemoryUnlimited", r.MemoryLimit, os.Getpagesize())
	}
	return nil
}

// Values returns the interface files and contents that carry r on cgroup version v, in the
// order they are written. Only set fields produce values; r must be valid.
func (r Resources) Values(v Version) []Value {
	var out []Value
	if !r.CPUs.IsEmpty() {
		out = append(out, Value{CPUSet, fileCPUs, r.CPUs.String()})
	}
	if r.MigrateMemory && v == V1 {
		out = append(out, Value{CPUSet, fileMemMigrate, "1"})
	}
	if !r.Mems.IsEmpty() {
		out = append(out, Value{CPUSet, fileMems, r.Mems.String()})
	}
	if q := r.CPUQuota; q.PeriodUS != 0 {
		quota := strconv.FormatInt(q.QuotaUS, 10)
		period := strconv.FormatUint(q.PeriodUS, 10)
		if v == V1 {
			out = append(out, Value{CPU, filePeriod, period}, Value{CPU, fileQuota, quota})
		} else {
			if q.QuotaUS == QuotaUnlimited {
				quota = unlimitedV2String
			}
			out = append(out, Value{CPU, fileCPUMax, quota + " " + period})
		}
	}
	if r.CPUShares != 0 {
		if v == V1 {
			out = append(out, Value{CPU, fileShares, strconv.FormatUint(r.CPUShares, 10)})
		} else {
			w := cgroups.ConvertCPUSharesToCgroupV2Value(r.CPUShares)
			out = append(out, Value{CPU, fileWeight, strconv.FormatUint(w, 10)})
		}
	}
	if r.MemoryLimit != 0 {
		out = append(out, memoryValue(v, r.MemoryLimit))
	}
	return out
}

func memoryValue(v Version, limit int64) Value {
	data := "-1"
	if limit != MemoryUnlimited {
		page := int64(os.Getpagesize())
		data = strconv.FormatInt(limit/page*page, 10)
	} else if v == V2 {
		data = unlimitedV2String
	}
	if v == V1 {
		return Value{Memory, fileMemLimit, data}
	}
	return Value{Memory, fileMemMax, data}
}

// canonical rewrites what an interface file reads back into the spelling Values produces, so
// that equal settings compare equal as strings.
func canonical(file, raw string) (string, error) {
	s := strings.TrimSpace(raw)
	bad := func(want string) (string, error) {
		return "", fmt.Errorf("%s reads %q: want %s", file, truncate(s), want)
	}
	switch file {
	case fileCPUs, fileMems, fileV1EffCPUs, fileV1EffMems, fileV2EffCPUs, fileV2EffMems:
		set, err := cpulist.Parse(s)
		if err != nil {
			return bad("a kernel CPU list")
		}
		return set.String(), nil
	case filePeriod, fileQuota, fileShares, fileWeight, fileMemMigrate:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad("an integer")
		}
		return strconv.FormatInt(n, 10), nil
	case fileMemLimit:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad("a byte count")
		}
		page := uint64(os.Getpagesize())
		if n >= math.MaxInt64/page*page {
			return "-1", nil
		}
		return strconv.FormatUint(n, 10), nil
	case fileMemMax:
		if s == unlimitedV2String {
			return s, nil
		}
		n, err := strconv.ParseUint(s, 10, 63)
		if err != nil {
			return bad(`a byte count or "max"`)
		}
		return strconv.FormatUint(n, 10), nil
	case fileCPUMax:
		quota, period, ok := strings.Cut(s, " ")
		p, err := strconv.ParseUint(period, 10, 64)
		if !ok || err != nil {
			return bad(`"<quota|max> <period>"`)
		}
		if quota != unlimitedV2String {
			q, err := strconv.ParseInt(quota, 10, 64)
			if err != nil {
				return bad(`"<quota|max> <period>"`)
			}
			quota = strconv.FormatInt(q, 10)
		}
		return quota + " " + strconv.FormatUint(p, 10), nil
	case filePartition:
		return s, nil
	}
	return "", fmt.Errorf("%s: not a file finegrain reads", file)
}

// controllerOf returns the controller an interface file belongs to.
func controllerOf(file string) Controller {
	c, _, _ := strings.Cut(file, ".")
	return Controller(c)
}
