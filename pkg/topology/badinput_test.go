package topology

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// copyFixture copies a fixture tree into a temporary directory a test may damage.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src := fixtureRoot(name)
	dst := filepath.Join(t.TempDir(), "sys")
	for rel, data := range treeFiles(t, src) {
		path := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func writeFile(t *testing.T, root, rel, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, rel), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removePath(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
}

const (
	cpuDirRel  = "devices/system/cpu/"
	nodeDirRel = "devices/system/node/"
)

func TestDiscoverRejectsBadFiles(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, root string)
		// file is the path (relative to the root) the error must name; want a phrase it must hold.
		file, want   string
		missing      bool // errors.Is(err, fs.ErrNotExist)
		inconsistent bool // errors.Is(err, ErrInconsistent)
	}{
		{
			name:   "missing online list",
			damage: func(t *testing.T, r string) { removePath(t, r, cpuDirRel+"online") },
			file:   cpuDirRel + "online", want: "kernel list", missing: true,
		},
		{
			name:   "truncated core_id",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu7/topology/core_id", "") },
			file:   cpuDirRel + "cpu7/topology/core_id", want: "file is empty",
		},
		{
			name:   "malformed core_id",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu7/topology/core_id", "seven\n") },
			file:   cpuDirRel + "cpu7/topology/core_id", want: "non-negative decimal integer",
		},
		{
			name:   "unknown package",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu3/topology/physical_package_id", "-1\n") },
			file:   cpuDirRel + "cpu3/topology/physical_package_id", want: "negative",
		},
		{
			name:   "missing thread siblings",
			damage: func(t *testing.T, r string) { removePath(t, r, cpuDirRel+"cpu20/topology/thread_siblings_list") },
			file:   cpuDirRel + "cpu20/topology/thread_siblings_list", missing: true,
		},
		{
			name:   "malformed node cpulist",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"node1/cpulist", "18-35x\n") },
			file:   nodeDirRel + "node1/cpulist", want: `"35x" is not a CPU number`,
		},
		{
			name:   "reversed range",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"online", "35-0\n") },
			file:   cpuDirRel + "online", want: `range "35-0" runs backwards`,
		},
		{
			name:   "missing meminfo",
			damage: func(t *testing.T, r string) { removePath(t, r, nodeDirRel+"node1/meminfo") },
			file:   nodeDirRel + "node1/meminfo", missing: true,
		},
		{
			name: "meminfo of another node",
			damage: func(t *testing.T, r string) {
				writeFile(t, r, nodeDirRel+"node1/meminfo", "Node 0 MemTotal:       65841664 kB\n")
			},
			file: nodeDirRel + "node1/meminfo", want: "want node 1",
		},
		{
			name:   "short distance row",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"node0/distance", "10\n") },
			file:   nodeDirRel + "node0/distance", want: "1 distances for 2 online nodes",
		},
		{
			name:   "malformed cache size",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu0/cache/index3/size", "45MB\n") },
			file:   cpuDirRel + "cpu0/cache/index3/size", want: "no K suffix",
		},
		{
			name:   "cache index without level",
			damage: func(t *testing.T, r string) { removePath(t, r, cpuDirRel+"cpu18/cache/index1/level") },
			file:   cpuDirRel + "cpu18/cache/index1/level", missing: true,
		},
		{
			name: "siblings contradict core ids",
			damage: func(t *testing.T, r string) {
				writeFile(t, r, cpuDirRel+"cpu0/topology/thread_siblings_list", "0-1\n")
				writeFile(t, r, cpuDirRel+"cpu1/topology/thread_siblings_list", "0-1\n")
			},
			file: cpuDirRel + "cpu0/topology/thread_siblings_list", want: "core_id", inconsistent: true,
		},
		{
			name:   "two cores share a core id without saying so",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu1/topology/core_id", "0\n") },
			file:   cpuDirRel + "cpu0/topology/thread_siblings_list", want: `"0-1"`, inconsistent: true,
		},
		{
			name:   "CPU in two nodes",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"node1/cpulist", "17-35\n") },
			file:   nodeDirRel + "node1/cpulist", want: "CPU 17", inconsistent: true,
		},
		{
			name:   "online CPU in no node",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"node1/cpulist", "19-35\n") },
			file:   nodeDirRel, want: "CPU 18 is online", inconsistent: true,
		},
		{
			name:   "has_cpu disagrees",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"has_cpu", "0\n") },
			file:   nodeDirRel + "has_cpu", inconsistent: true,
		},
		{
			name:   "has_memory disagrees",
			damage: func(t *testing.T, r string) { writeFile(t, r, nodeDirRel+"has_memory", "0\n") },
			file:   nodeDirRel + "node1/meminfo", inconsistent: true,
		},
		{
			name:   "online and offline overlap",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"offline", "35\n") },
			file:   cpuDirRel + "offline", inconsistent: true,
		},
		{
			name:   "online CPU not present",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"present", "0-34\n") },
			file:   cpuDirRel + "present", inconsistent: true,
		},
		{
			name: "L3 groups overlap",
			damage: func(t *testing.T, r string) {
				writeFile(t, r, cpuDirRel+"cpu18/cache/index3/shared_cpu_list", "17-35\n")
			},
			file: cpuDirRel + "cpu18/cache/index3/shared_cpu_list", want: "CPU 17", inconsistent: true,
		},
		{
			name: "CPU outside its own L3",
			damage: func(t *testing.T, r string) {
				writeFile(t, r, cpuDirRel+"cpu18/cache/index3/shared_cpu_list", "19-35\n")
			},
			file: cpuDirRel + "cpu18/cache/index3/shared_cpu_list", want: "includes the CPU itself",
		},
		{
			name:   "some CPUs without L3",
			damage: func(t *testing.T, r string) { removePath(t, r, cpuDirRel+"cpu18/cache/index3") },
			file:   cpuDirRel + "cpu18/cache", want: "CPU 0 reports a level-3 cache", inconsistent: true,
		},
		{
			name:   "two L3 caches with one id",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu18/cache/index3/id", "0\n") },
			file:   cpuDirRel + "cpu0/cache/index3", want: "same id 0", inconsistent: true,
		},
		{
			name:   "truncated L3 list",
			damage: func(t *testing.T, r string) { writeFile(t, r, cpuDirRel+"cpu0/cache/index3/shared_cpu_list", "") },
			file:   cpuDirRel + "cpu0/cache/index3/shared_cpu_list", want: "file is empty",
		},
		{
			name:   "partial node directory",
			damage: func(t *testing.T, r string) { removePath(t, r, nodeDirRel+"online") },
			file:   nodeDirRel + "online", missing: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, "xeon-e5-2697v4-2s")
			tc.damage(t, root)
			topo, err := Discover(root)
			if err == nil {
				t.Fatalf("Discover succeeded on a damaged tree: %d CPUs", topo.NumCPUs())
			}
			msg := err.Error()
			if !strings.Contains(msg, filepath.Join(root, tc.file)) {
				t.Errorf("error %q does not name %s", msg, tc.file)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			var fe *FileError
			if !tc.inconsistent && !errors.As(err, &fe) {
				t.Errorf("error %q is not a *FileError", msg)
			}
			if got := errors.Is(err, ErrInconsistent); got != tc.inconsistent {
				t.Errorf("errors.Is(%q, ErrInconsistent) = %v, want %v", msg, got, tc.inconsistent)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != tc.missing {
				t.Errorf("errors.Is(%q, fs.ErrNotExist) = %v, want %v", msg, got, tc.missing)
			}
		})
	}
}

func TestDiscoverOptionalFiles(t *testing.T) {
	root := copyFixture(t, "xeon-gold-6248-2s-smt")
	for cpu := 0; cpu < 80; cpu++ {
		d := cpuDirRel + "cpu" + strconv.Itoa(cpu)
		removePath(t, root, d+"/topology/die_id") // kernels before 5.2
		removePath(t, root, d+"/cache")           // hosts that report no caches
	}
	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(topo.Cores), 40; got != want {
		t.Errorf("cores = %d, want %d", got, want)
	}
	if got := len(topo.L3Groups); got != 0 {
		t.Errorf("L3 groups = %d, want none on a host without cache information", got)
	}
	if got, want := topo.Siblings(59).String(), "19,59"; got != want {
		t.Errorf("siblings(59) = %s, want %s", got, want)
	}
}

func TestDiscoverWithoutOptionalCacheAttributes(t *testing.T) {
	root := copyFixture(t, "epyc-7451-2s-smt")
	for cpu := 0; cpu < 96; cpu++ {
		d := cpuDirRel + "cpu" + strconv.Itoa(cpu) + "/cache/index3/"
		removePath(t, root, d+"id")   // kernels before 4.11, many Arm hosts
		removePath(t, root, d+"size") // caches whose size the firmware does not report
	}
	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(topo.L3Groups), 16; got != want {
		t.Fatalf("L3 groups = %d, want %d grouped by shared_cpu_list", got, want)
	}
	if got, want := topo.L3Groups[5].CPUs.String(), "15-17,63-65"; got != want {
		t.Errorf("L3 group 5 = %s, want %s", got, want)
	}
	if got := topo.L3Groups[5].SizeBytes; got != 0 {
		t.Errorf("L3 size = %d, want 0 when sysfs has no size", got)
	}
}

// A kernel built without NUMA support has no devices/system/node: the host is NUMA node 0 and its
// memory is the sum of the online memory blocks.
func TestDiscoverWithoutNUMASupport(t *testing.T) {
	root := copyFixture(t, "vm-kvm-epyc-2cpu")
	removePath(t, root, "devices/system/node")

	topo, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topo.NUMANodes); got != 1 || topo.NUMANodes[0].CPUs.String() != "0-1" || topo.NUMANodes[0].MemoryBytes != 0 {
		t.Errorf("NUMA nodes = %+v, want node 0 with CPUs 0-1 and 0 bytes (no memory directory)", topo.NUMANodes)
	}

	mem := "devices/system/memory/"
	writeFile(t, root, mem+"block_size_bytes", "8000000\n")
	writeFile(t, root, mem+"memory0/online", "1\n")
	writeFile(t, root, mem+"memory1/online", "1\n")
	writeFile(t, root, mem+"memory7/online", "0\n")
	writeFile(t, root, mem+"auto_online_blocks", "online\n")
	topo, err = Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topo.NUMANodes[0].MemoryBytes, uint64(2*0x8000000); got != want {
		t.Errorf("memory = %d, want %d (two online 128 MiB blocks)", got, want)
	}
	if got, want := topo.Distance(0, 0), 10; got != want {
		t.Errorf("distance(0,0) = %d, want %d", got, want)
	}

	writeFile(t, root, mem+"memory1/online", "yes\n")
	if _, err := Discover(root); err == nil || !strings.Contains(err.Error(), filepath.Join(root, mem+"memory1/online")) {
		t.Errorf("Discover with a malformed memory block = %v, want an error naming memory1/online", err)
	}
}

func TestDiscoverMissingRoot(t *testing.T) {
	_, err := Discover(filepath.Join(t.TempDir(), "nothing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "devices/system/cpu/online") {
		t.Errorf("Discover of a missing root = %v, want a missing-file error naming devices/system/cpu/online", err)
	}
}
