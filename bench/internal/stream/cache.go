package stream

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LastLevelCache returns the total size in bytes of the highest-level data or unified caches
// under sysfsRoot (normally /sys), counting each cache instance once (instances are told apart
// by their shared_cpu_list).
func LastLevelCache(sysfsRoot string) (int64, error) {
	pattern := filepath.Join(sysfsRoot, "devices/system/cpu/cpu[0-9]*/cache/index[0-9]*")
	dirs, err := filepath.Glob(pattern)
	if err != nil {
		return 0, fmt.Errorf("list caches %s: %w", pattern, err)
	}
	if len(dirs) == 0 {
		return 0, fmt.Errorf("no CPU cache information under %s: give the array size explicitly", pattern)
	}
	type instance struct {
		level  int
		shared string
	}
	sizes := map[instance]int64{}
	top := 0
	for _, dir := range dirs {
		typ, err := readTrimmed(dir, "type")
		if err != nil {
			return 0, err
		}
		if typ == "Instruction" {
			continue
		}
		var in instance
		var size int64
		if in.level, err = readInt(dir, "level"); err != nil {
			return 0, err
		}
		if in.shared, err = readTrimmed(dir, "shared_cpu_list"); err != nil {
			return 0, err
		}
		if size, err = readSize(dir); err != nil {
			return 0, err
		}
		sizes[in] = size
		top = max(top, in.level)
	}
	var total int64
	for in, size := range sizes {
		if in.level == top {
			total += size
		}
	}
	return total, nil
}

// DefaultLen is STREAM's rule: each array at least four times the last-level caches together.
func DefaultLen(sysfsRoot string) (int, error) {
	llc, err := LastLevelCache(sysfsRoot)
	if err != nil {
		return 0, err
	}
	return int(max(4*llc/8, minLen)), nil
}

func readTrimmed(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("read cache attribute: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(dir, name string) (int, error) {
	s, err := readTrimmed(dir, name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("cache attribute %s: %q is not a number: %w", filepath.Join(dir, name), s, err)
	}
	return v, nil
}

func readSize(dir string) (int64, error) {
	s, err := readTrimmed(dir, "size")
	if err != nil {
		return 0, err
	}
	v, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("cache size %s: %w", filepath.Join(dir, "size"), err)
	}
	return v, nil
}

// parseSize reads a sysfs cache size such as "32768K", "1M" or "512".
func parseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for suffix, m := range map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			num, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a positive size like 32768K", s)
	}
	return v * mult, nil
}
