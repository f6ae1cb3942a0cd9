package sim

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// syntheticPrefix starts a synthetic machine description.
const syntheticPrefix = "synthetic:"

// defaultSyntheticMemoryGiB is each NUMA node's memory when a synthetic description omits it.
const defaultSyntheticMemoryGiB = 64

// LoadMachine returns the node topology a description names, and a short name for reports:
// either a sysfs tree (a directory laid out like /sys, such as
// pkg/topology/testdata/xeon-e5-2697v4-2s/sys) read with topology.Discover, or
// "synthetic:SOCKETSxNUMAxL3xCORESxTHREADS[:GiB]" built with topology.Synthetic, the counts
// per socket, per NUMA node, per L3 group and per core, GiB the memory per NUMA node (64 when
// omitted) — "synthetic:2x1x1x18x1" is a node of the fine-grained scheduling paper.
func LoadMachine(desc string) (*topology.Topology, string, error) {
	if rest, ok := strings.CutPrefix(desc, syntheticPrefix); ok {
		shape, err := parseShape(rest)
		if err != nil {
			return nil, "", fmt.Errorf("machine %q: %w", desc, err)
		}
		t, err := topology.Synthetic(shape)
		if err != nil {
			return nil, "", fmt.Errorf("machine %q: %w", desc, err)
		}
		return t, desc, nil
	}
	t, err := topology.Discover(desc)
	if err != nil {
		return nil, "", fmt.Errorf("machine %q: read it as a sysfs tree: %w (or describe one as %sSOCKETSxNUMAxL3xCORESxTHREADS)", desc, err, syntheticPrefix)
	}
	name := filepath.Base(filepath.Clean(desc))
	if name == "sys" {
		name = filepath.Base(filepath.Dir(filepath.Clean(desc)))
	}
	return t, name, nil
}

func parseShape(s string) (topology.Shape, error) {
	counts, memText, hasMem := strings.Cut(s, ":")
	parts := strings.Split(counts, "x")
	if len(parts) != 5 {
		return topology.Shape{}, fmt.Errorf("want SOCKETSxNUMAxL3xCORESxTHREADS[:GiB], five counts joined by x")
	}
	var n [5]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > 4096 {
			return topology.Shape{}, fmt.Errorf("count %q: want a whole number from 1 to 4096", p)
		}
		n[i] = v
	}
	if n[0]*n[1]*n[2]*n[3]*n[4] > 1<<16 {
		return topology.Shape{}, fmt.Errorf("%d CPUs: more than the %d a simulated node may have", n[0]*n[1]*n[2]*n[3]*n[4], 1<<16)
	}
	mem := defaultSyntheticMemoryGiB
	if hasMem {
		v, err := strconv.Atoi(memText)
		if err != nil || v < 1 || v > 1<<20 {
			return topology.Shape{}, fmt.Errorf("memory %q: want whole GiB per NUMA node, 1 to %d", memText, 1<<20)
		}
		mem = v
	}
	return topology.Shape{Sockets: n[0], NUMAPerSocket: n[1], L3PerNUMA: n[2], CoresPerL3: n[3], ThreadsPerCore: n[4],
		MemoryPerNUMA: uint64(mem) << 30}, nil
}
