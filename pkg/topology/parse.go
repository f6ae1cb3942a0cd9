package topology

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Expectations, as error messages state them.
const (
	wantList      = `a kernel list such as "0-3,8" (or an empty line)`
	wantNonNegInt = "a non-negative decimal integer"
	wantCacheSize = `a cache size such as "32768K"`
	wantCacheType = `"Data", "Instruction" or "Unified"`
	wantMeminfo   = `a "Node N MemTotal: <n> kB" line`
	wantDistances = "one positive distance per online NUMA node"
	wantHex       = "a hexadecimal number"
	wantBlockOn   = `"0" or "1"`
	wantPCIHex    = `a hexadecimal number with its 0x prefix, such as "0x020000"`
	wantNUMANode  = "a NUMA node number, or -1 for none"
	wantOperState = `an interface's operational state, such as "up"`
)

var errEmpty = errors.New("file is empty")

// content strips the single trailing newline sysfs attributes end with. It rejects an empty file:
// every attribute the reader uses prints at least a newline, so zero bytes means truncation.
func content(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, errEmpty
	}
	if data[len(data)-1] == '\n' {
		data = data[:len(data)-1]
	}
	return data, nil
}

// parseListFile parses the contents of a list file (with its trailing newline); an empty file is
// truncated, not an empty list.
func parseListFile(data []byte) (cpuset.CPUSet, error) {
	data, err := content(data)
	if err != nil {
		return cpuset.New(), err
	}
	return cpulist.Parse(string(data))
}

// parseIntFile parses a file holding one decimal integer, as topology/core_id does. Negative
// values are returned as they are; callers decide whether they make sense.
func parseIntFile(data []byte) (int, error) {
	data, err := content(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(data), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit decimal integer", data)
	}
	return int(n), nil
}

// parseCacheSize parses cache/indexN/size, which the kernel prints as kibibytes with a "K".
func parseCacheSize(data []byte) (uint64, error) {
	data, err := content(data)
	if err != nil {
		return 0, err
	}
	num, ok := bytes.CutSuffix(data, []byte{'K'})
	if !ok {
		return 0, fmt.Errorf("%q has no K suffix", data)
	}
	kib, err := strconv.ParseUint(string(num), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size in KiB", data)
	}
	return kib << 10, nil
}

// cacheType is cache/indexN/type.
type cacheType uint8

const (
	cacheData cacheType = iota + 1
	cacheInstruction
	cacheUnified
)

func parseCacheType(data []byte) (cacheType, error) {
	data, err := content(data)
	if err != nil {
		return 0, err
	}
	switch string(data) {
	case "Data":
		return cacheData, nil
	case "Instruction":
		return cacheInstruction, nil
	case "Unified":
		return cacheUnified, nil
	}
	return 0, fmt.Errorf("unknown cache type %q", data)
}

// parseNodeMemTotal finds "Node <node> MemTotal: <n> kB" in nodeN/meminfo and returns bytes.
func parseNodeMemTotal(data []byte, node int) (uint64, error) {
	return parseNodeMeminfo(data, node, "MemTotal")
}

// parseNodeMeminfo finds "Node <node> <field>: <n> kB" in nodeN/meminfo and returns bytes.
func parseNodeMeminfo(data []byte, node int, field string) (uint64, error) {
	if len(data) == 0 {
		return 0, errEmpty
	}
	for line := range bytes.Lines(data) {
		fields := bytes.Fields(line)
		if len(fields) < 3 || string(fields[0]) != "Node" || string(fields[2]) != field+":" {
			continue
		}
		if len(fields) != 5 || string(fields[4]) != "kB" {
			return 0, fmt.Errorf("malformed line %q", bytes.TrimSpace(line))
		}
		id, err := strconv.Atoi(string(fields[1]))
		if err != nil || id != node {
			return 0, fmt.Errorf("line %q is for node %q, want node %d", bytes.TrimSpace(line), fields[1], node)
		}
		kib, err := strconv.ParseUint(string(fields[3]), 10, 64)
		if err != nil || kib > 1<<53 {
			return 0, fmt.Errorf("line %q: %q is not a size in kB", bytes.TrimSpace(line), fields[3])
		}
		return kib << 10, nil
	}
	return 0, fmt.Errorf("no %s line", field)
}

// parseDistances parses nodeN/distance: one SLIT distance per online node, space separated.
func parseDistances(data []byte, want int) ([]int, error) {
	data, err := content(data)
	if err != nil {
		return nil, err
	}
	fields := bytes.Fields(data)
	if len(fields) != want {
		return nil, fmt.Errorf("%d distances for %d online nodes", len(fields), want)
	}
	row := make([]int, len(fields))
	for i, f := range fields {
		d, err := strconv.Atoi(string(f))
		if err != nil || d <= 0 || d > 255 {
			return nil, fmt.Errorf("distance %q is not in 1..255", f)
		}
		row[i] = d
	}
	return row, nil
}

// parseHexFile parses memory/block_size_bytes, which the kernel prints in hex without "0x".
func parseHexFile(data []byte) (uint64, error) {
	data, err := content(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(data), 16, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a positive hexadecimal number", data)
	}
	return n, nil
}

// parsePCIHex parses a PCI device's class, vendor or device, which the kernel prints in hex with
// "0x" ("0x020000", "0x15b3").
func parsePCIHex(data []byte) (uint64, error) {
	data, err := content(data)
	if err != nil {
		return 0, err
	}
	digits, ok := bytes.CutPrefix(data, []byte("0x"))
	if !ok {
		return 0, fmt.Errorf("%q has no 0x prefix", data)
	}
	n, err := strconv.ParseUint(string(digits), 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit hexadecimal number", data)
	}
	return n, nil
}

// parseBlockOnline parses memory/memoryN/online.
func parseBlockOnline(data []byte) (bool, error) {
	data, err := content(data)
	if err != nil {
		return false, err
	}
	switch string(data) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%q is neither 0 nor 1", data)
}
