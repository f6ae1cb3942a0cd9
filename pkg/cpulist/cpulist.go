// Package cpulist owns the kernel's list syntax for CPU and memory-node sets ("0-3,8,10-11", as
// sysfs, cgroupfs, /proc and the node agent's NodeResourceTopology attributes print them) and the
// bound every reader in finegrain applies to it. Parse returns a k8s.io/utils/cpuset value, whose
// String writes the same syntax back; Count sizes a list without building the set. Every list
// finegrain reads — sysfs files, cgroup files, checkpoints, flags, published free-core maps,
// benchmark results — goes through this package, so that all of them accept the same inputs. It
// must not read files or know what a list describes.
//
// The syntax, exactly:
//   - surrounding whitespace is ignored (the newline every sysfs and cgroupfs list ends with, the
//     padding of a flag or a YAML value); whitespace inside the list is an error;
//   - an empty list (or only whitespace) is the empty set;
//   - items are separated by commas; an item is a number or an ascending range "a-b" (a ≤ b);
//   - numbers are decimal digits only (no sign, no "0x"), leading zeros allowed, at most MaxID;
//   - items may come in any order and may overlap (the kernel accepts such lists when they are
//     written to it, and so does cpuset.Parse), but their lengths may add up to at most MaxID+1,
//     so that no input makes a reader do more than a bounded amount of work.
//
// A reader that knows how many CPUs the list can name (the CPU capacity of the node whose object
// it reads) passes that bound to ParseWithin and CountWithin: a longer list is a *TooManyError,
// found after reading at most bound+1 of its CPUs.
package cpulist

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxID is the largest CPU or NUMA node number a list may hold: twice Linux's largest NR_CPUS
// (8192, x86's MAXSMP) and far above its MAX_NUMNODES (1024). A number above it is a corrupt or
// hostile list, and refusing it keeps "0-4000000000" from costing gigabytes.
const MaxID = 16383

// MaxCPUs bounds the sum of the lengths of a list's items: the most CPUs any list may name.
const MaxCPUs = MaxID + 1

// TooManyError says that a list names more CPUs than its reader allows.
type TooManyError struct {
	// Max is the reader's bound.
	Max int
}

func (e *TooManyError) Error() string { return fmt.Sprintf("the list names more than %d CPUs", e.Max) }

// Parse reads a list. The error says which item is wrong and how; callers add which object and
// field the list came from.
func Parse(s string) (cpuset.CPUSet, error) { return ParseWithin(s, MaxCPUs) }

// ParseWithin reads a list that may name at most bound CPUs (at most MaxCPUs): a longer one is a
// *TooManyError.
func ParseWithin(s string, bound int) (cpuset.CPUSet, error) {
	var ids []int
	if err := scan(s, bound, func(lo, hi int) {
		for id := lo; id <= hi; id++ {
			ids = append(ids, id)
		}
	}); err != nil {
		return cpuset.New(), err
	}
	return cpuset.New(ids...), nil
}

// MustParse is Parse for lists written in code; it panics on a malformed one.
func MustParse(s string) cpuset.CPUSet {
	set, err := Parse(s)
	if err != nil {
		panic(fmt.Sprintf("cpulist.MustParse(%q): %v", s, err))
	}
	return set
}

// Count returns how many distinct IDs a list names, accepting exactly what Parse accepts. It
// does not allocate: a list whose items ascend without overlapping (every list the kernel and
// cpuset.String print) is counted range by range, any other in a fixed bitmap of MaxID+1 bits.
func Count(s string) (int, error) { return CountWithin(s, MaxCPUs) }

// CountWithin is Count for a list that may name at most bound CPUs (at most MaxCPUs), accepting
// exactly what ParseWithin accepts.
func CountWithin(s string, bound int) (int, error) {
	n, prev, ordered := 0, -1, true
	if err := scan(s, bound, func(lo, hi int) {
		n += hi - lo + 1
		ordered = ordered && lo > prev
		prev = hi
	}); err != nil {
		return 0, err
	}
	if ordered {
		return n, nil
	}
	var seen [MaxCPUs / 64]uint64
	_ = scan(s, bound, func(lo, hi int) {
		for id := lo; id <= hi; id++ {
			seen[id/64] |= 1 << (id % 64)
		}
	})
	n = 0
	for _, w := range seen {
		n += bits.OnesCount64(w)
	}
	return n, nil
}

// scan checks a list whose items' lengths add up to at most bound (clamped to 0..MaxCPUs) and
// calls item for each of its items in order.
func scan(s string, bound int, item func(lo, hi int)) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	bound = min(MaxCPUs, max(bound, 0))
	total := 0
	for len(s) > 0 {
		part, rest, _ := strings.Cut(s, ",")
		lo, hi, err := parseItem(part)
		if err != nil {
			return err
		}
		if total += hi - lo + 1; total > bound {
			return &TooManyError{Max: bound}
		}
		item(lo, hi)
		if len(rest) == 0 && len(part) < len(s) {
			return errors.New("the list ends with a comma")
		}
		s = rest
	}
	return nil
}

func parseItem(part string) (lo, hi int, err error) {
	first, last, isRange := strings.Cut(part, "-")
	if lo, err = parseID(first); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseID(last); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", part)
	}
	return lo, hi, nil
}

func parseID(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a CPU number", s)
		}
		if n = n*10 + int(c-'0'); n > MaxID {
			for _, c := range s[i+1:] {
				if c < '0' || c > '9' {
					return 0, fmt.Errorf("%q is not a CPU number", s)
				}
			}
			return 0, fmt.Errorf("CPU number %s is out of range 0-%d", s, MaxID)
		}
	}
	return n, nil
}
