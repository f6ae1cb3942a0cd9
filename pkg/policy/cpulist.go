package policy

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxCPUID is the largest CPU or NUMA node number ParseCPUList accepts, well above any kernel's
// NR_CPUS; it bounds the work a malformed list can cause.
const MaxCPUID = 16383

// ParseCPUList reads a CPU or memory-node list in kernel list format ("0-3,8"; empty for none).
// Unlike cpuset.Parse it bounds IDs by MaxCPUID and rejects lists whose ranges add up to more
// than that, so untrusted text cannot make it allocate without bound.
func ParseCPUList(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), nil
	}
	ids := []int{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPUID(lo)
		if err != nil {
			return cpuset.New(), fmt.Errorf("CPU list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = parseCPUID(hi); err != nil {
				return cpuset.New(), fmt.Errorf("CPU list %q: %w", s, err)
			}
			if last < first {
				return cpuset.New(), fmt.Errorf("CPU list %q: range %q runs backwards", s, part)
			}
		}
		if len(ids)+last-first+1 > MaxCPUID+1 {
			return cpuset.New(), fmt.Errorf("CPU list %q names more than %d CPUs", s, MaxCPUID+1)
		}
		for id := first; id <= last; id++ {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...), nil
}

func parseCPUID(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	id, err := strconv.Atoi(s)
	if err != nil || id > MaxCPUID {
		return 0, fmt.Errorf("CPU number %q is out of range 0-%d", s, MaxCPUID)
	}
	return id, nil
}
