package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// These tests run inside the guests and check the harness itself: that the kernel reports the
// machine qemu was told to build, read straight from sysfs without any finegrain code, and that
// /init mounted cgroups as the configuration says. Packages' own guest tests rely on both.

func readSys(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func readSysSet(t *testing.T, path string) cpuset.CPUSet {
	t.Helper()
	s, err := cpuset.Parse(readSys(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

func TestGuestCPUsMatchMachine(t *testing.T) {
	m := Guest(t).Machine
	cpu := "/sys/devices/system/cpu"
	if got, want := readSysSet(t, cpu+"/online"), m.Online(); !got.Equals(want) {
		t.Errorf("online CPUs = %s, qemu was given %s", got, want)
	}
	if got, want := readSysSet(t, cpu+"/offline"), m.Offline(); !got.Equals(want) {
		t.Errorf("offline CPUs = %s, want %s", got, want)
	}
	for _, id := range m.Online().List() {
		dir := fmt.Sprintf("%s/cpu%d/topology", cpu, id)
		if got, want := readSys(t, dir+"/physical_package_id"), strconv.Itoa(m.SocketOf(id)); got != want {
			t.Errorf("CPU %d: socket %s, want %s", id, got, want)
		}
		if got, want := readSys(t, dir+"/core_id"), strconv.Itoa(m.CoreIDOf(id)); got != want {
			t.Errorf("CPU %d: core_id %s, want %s", id, got, want)
		}
	}
	for _, core := range m.Cores() {
		first := core.List()[0]
		path := fmt.Sprintf("%s/cpu%d/topology/thread_siblings_list", cpu, first)
		if got := readSysSet(t, path); !got.Equals(core) {
			t.Errorf("CPU %d: siblings %s, want %s", first, got, core)
		}
	}
}

func TestGuestNUMANodesMatchMachine(t *testing.T) {
	m := Guest(t).Machine
	dirs, err := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(m.Nodes) {
		t.Fatalf("guest has %d NUMA nodes (%v), qemu was given %d", len(dirs), dirs, len(m.Nodes))
	}
	for id, node := range m.Nodes {
		dir := fmt.Sprintf("/sys/devices/system/node/node%d", id)
		if got, want := readSysSet(t, dir+"/cpulist"), m.NodeCPUs(id); !got.Equals(want) {
			t.Errorf("node %d: CPUs %s, want %s", id, got, want)
		}
		var want []string
		for j := range m.Nodes {
			want = append(want, strconv.Itoa(m.Distance(id, j)))
		}
		if got := readSys(t, dir+"/distance"); got != strings.Join(want, " ") {
			t.Errorf("node %d: distances %q, want %q", id, got, strings.Join(want, " "))
		}
		var kb uint64
		meminfo := readSys(t, dir+"/meminfo")
		if _, err := fmt.Sscanf(meminfo[strings.Index(meminfo, "MemTotal:"):], "MemTotal: %d kB", &kb); err != nil {
			t.Fatalf("node %d: MemTotal in %q: %v", id, meminfo, err)
		}
		// The kernel keeps part of each node for itself; most of it must be there.
		if gotMiB := int(kb / 1024); gotMiB > node.MemoryMiB || gotMiB < node.MemoryMiB*8/10 {
			t.Errorf("node %d: MemTotal %d MiB, qemu gave it %d MiB", id, gotMiB, node.MemoryMiB)
		}
	}
}

func TestGuestCgroupsMounted(t *testing.T) {
	cfg := Guest(t)
	switch cfg.Cgroup {
	case CgroupV2:
		enabled := strings.Fields(readSys(t, "/sys/fs/cgroup/cgroup.subtree_control"))
		for _, c := range []string{"cpuset", "cpu", "io", "memory", "pids"} {
			if !slices.Contains(enabled, c) {
				t.Errorf("cgroup v2 root enables %v, missing %s", enabled, c)
			}
		}
		if got := readSysSet(t, "/sys/fs/cgroup/cpuset.cpus.effective"); !got.Equals(cfg.Machine.Online()) {
			t.Errorf("root cpuset.cpus.effective = %s, want the online CPUs %s", got, cfg.Machine.Online())
		}
	case CgroupV1:
		if got := readSysSet(t, "/sys/fs/cgroup/cpuset/cpuset.cpus"); !got.Equals(cfg.Machine.Online()) {
			t.Errorf("v1 root cpuset.cpus = %s, want the online CPUs %s", got, cfg.Machine.Online())
		}
		for _, f := range []string{"cpu/cpu.cfs_quota_us", "cpuacct/cpuacct.usage", "memory/memory.limit_in_bytes", "pids/tasks", "systemd/tasks"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", f)); err != nil {
				t.Errorf("v1 hierarchy file: %v", err)
			}
		}
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err != nil {
			t.Errorf("cgroup2 at /sys/fs/cgroup/unified: %v", err)
		}
	}
}
