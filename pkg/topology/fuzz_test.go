package topology

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// FuzzFileParsers feeds arbitrary bytes to every per-file parser: none may panic, and what they
// accept must be sane.
func FuzzFileParsers(f *testing.F) {
	for _, s := range []string{"0\n", "-1\n", "27\n", "", "32768K\n", "45MB\n", "K\n", "Unified\n", "Instruction\n",
		"Node 0 MemTotal:       65841664 kB\nNode 0 MemFree: 1 kB\n", "Node 1 MemTotal: 5 kB\n", "Node 0 MemTotal: x kB\n",
		"10 21\n", "10\n", "10 0\n", "8000000\n", "0\n", "1\n", "yes\n", "99999999999999999999\n",
		"0x020000\n", "0x15b3\n", "0x\n", "0x1ffffffff\n", "020000\n"} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, nodes uint8) {
		if n, err := parseIntFile(data); err == nil && (n > 1<<31-1 || n < -1<<31) {
			t.Fatalf("parseIntFile(%q) = %d, outside 32 bits", data, n)
		}
		if size, err := parseCacheSize(data); err == nil && size%1024 != 0 {
			t.Fatalf("parseCacheSize(%q) = %d, not whole KiB", data, size)
		}
		if typ, err := parseCacheType(data); err == nil && (typ < cacheData || typ > cacheUnified) {
			t.Fatalf("parseCacheType(%q) = %d", data, typ)
		}
		if mem, err := parseNodeMemTotal(data, 0); err == nil && mem%1024 != 0 {
			t.Fatalf("parseNodeMemTotal(%q) = %d, not whole KiB", data, mem)
		}
		if mem, err := parseNodeMeminfo(data, 0, "MemFree"); err == nil && mem%1024 != 0 {
			t.Fatalf("parseNodeMeminfo(%q, MemFree) = %d, not whole KiB", data, mem)
		}
		if n, err := parsePCIHex(data); err == nil && n > 1<<32-1 {
			t.Fatalf("parsePCIHex(%q) = %#x, beyond 32 bits", data, n)
		}
		if row, err := parseDistances(data, int(nodes)); err == nil {
			if len(row) != int(nodes) || slices.ContainsFunc(row, func(d int) bool { return d <= 0 }) {
				t.Fatalf("parseDistances(%q, %d) = %v", data, nodes, row)
			}
		}
		if n, err := parseHexFile(data); err == nil && n == 0 {
			t.Fatalf("parseHexFile(%q) = 0 without error", data)
		}
		_, _ = parseBlockOnline(data)
		if set, err := parseListFile(data); err == nil && set.Size() > cpulist.MaxID+1 {
			t.Fatalf("parseListFile(%q) returned %d CPUs", data, set.Size())
		}
	})
}

// FuzzDiscover replaces one file of a real tree with arbitrary bytes: Discover and ReadHardware
// must return an error or a topology (a reading) that satisfies its invariants, never panic.
func FuzzDiscover(f *testing.F) {
	src := fixtureRoot("vm-kvm-epyc-2cpu")
	names := treeNames(f, src)
	slices.Sort(names)
	root := filepath.Join(f.TempDir(), "sys")
	originals := map[string][]byte{}
	for _, rel := range names {
		data, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			f.Fatal(err)
		}
		originals[rel] = data
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), data, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for i, rel := range names {
		f.Add(uint8(i), originals[rel])
	}
	f.Add(uint8(0), []byte("0-3\n"))
	f.Add(uint8(5), []byte("0-1\n"))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		rel := names[int(which)%len(names)]
		path := filepath.Join(root, rel)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(path, originals[rel], 0o644); err != nil {
				t.Fatal(err)
			}
		}()
		topo, err := Discover(root)
		if err != nil {
			return
		}
		covered := cpuset.New()
		for _, c := range topo.Cores {
			if !c.CPUs.Intersection(covered).IsEmpty() {
				t.Fatalf("%s = %q: cores overlap at %s", rel, data, c.CPUs)
			}
			covered = covered.Union(c.CPUs)
		}
		if !covered.Equals(topo.OnlineCPUs) {
			t.Fatalf("%s = %q: cores cover %s, online CPUs are %s", rel, data, covered, topo.OnlineCPUs)
		}
		hw, err := ReadHardware(root, topo)
		if err != nil {
			return
		}
		for _, c := range hw.Caches {
			if c.CPUs.IsEmpty() || !c.CPUs.IsSubsetOf(topo.OnlineCPUs) {
				t.Fatalf("%s = %q: cache %s on CPUs %q, online CPUs are %s", rel, data, c.Name(), c.CPUs, topo.OnlineCPUs)
			}
		}
		for _, d := range hw.PCIDevices {
			if d.NUMANode != NoNUMA && topo.NUMANodeIndex(d.NUMANode) < 0 {
				t.Fatalf("%s = %q: device %s on unknown NUMA node %d", rel, data, d.Address, d.NUMANode)
			}
		}
	})
}
