package vm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatrixIsValid(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range append(Matrix(), Extra()...) {
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
		if seen[c.Name] {
			t.Errorf("configuration %s is listed twice", c.Name)
		}
		seen[c.Name] = true
	}
}

func TestMachineQemuArgs(t *testing.T) {
	c, _ := Lookup("v2-uneven-3numa-offline")
	got := strings.Join(c.Machine.qemuArgs(), " ")
	want := "-m 1536M -smp 12,sockets=2,cores=3,threads=2" +
		" -object memory-backend-ram,id=mem0,size=768M -numa node,nodeid=0,memdev=mem0,cpus=0-5" +
		" -object memory-backend-ram,id=mem1,size=256M -numa node,nodeid=1,memdev=mem1,cpus=6-7" +
		" -object memory-backend-ram,id=mem2,size=512M -numa node,nodeid=2,memdev=mem2,cpus=8-11" +
		" -numa dist,src=0,dst=1,val=21 -numa dist,src=0,dst=2,val=31 -numa dist,src=1,dst=2,val=12"
	if got != want {
		t.Errorf("qemu args:\n got %s\nwant %s", got, want)
	}
	if got, want := c.kernelArgs(), "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init maxcpus=11 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"; got != want {
		t.Errorf("kernel args:\n got %s\nwant %s", got, want)
	}
}

func TestMachineMemoryOnlyNodeHasNoCPUsArg(t *testing.T) {
	c, _ := Lookup("v2-memory-only-node")
	args := strings.Join(c.Machine.qemuArgs(), " ")
	if want := "-numa node,nodeid=2,memdev=mem2 -numa dist"; !strings.Contains(args, want) {
		t.Errorf("qemu args %q lack the memory-only node %q", args, want)
	}
}

func TestMachineExpectations(t *testing.T) {
	c, _ := Lookup("v2-uneven-3numa-offline")
	m := c.Machine
	var cores []string
	for _, core := range m.Cores() {
		cores = append(cores, core.String())
	}
	got := map[string]any{
		"online":  m.Online().String(),
		"offline": m.Offline().String(),
		"cores":   cores,
		"socket1": m.SocketCPUs(1).String(),
		"node2":   m.NodeCPUs(2).String(),
		"dist":    []int{m.Distance(0, 2), m.Distance(2, 1), m.Distance(1, 1)},
		"coreID9": m.CoreIDOf(9),
		"socket6": m.SocketOf(6),
	}
	want := map[string]any{
		"online":  "0-10",
		"offline": "11",
		"cores":   []string{"0-1", "2-3", "4-5", "6-7", "8-9", "10"},
		"socket1": "6-10",
		"node2":   "8-10",
		"dist":    []int{31, 12, 10},
		"coreID9": 1,
		"socket6": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uneven machine (-want +got):\n%s", diff)
	}
	d, _ := Lookup("v1-2numa-smt")
	if got := []int{d.Machine.Distance(0, 1), d.Machine.Distance(1, 1)}; !cmp.Equal(got, []int{20, 10}) {
		t.Errorf("default distances = %v, want qemu's [20 10]", got)
	}
}

func TestMachineValidateNamesTheProblem(t *testing.T) {
	good := func() Machine {
		return Machine{Sockets: 1, CoresPerSocket: 2, ThreadsPerCore: 2, Nodes: []Node{{CPUs: "0-1", MemoryMiB: 256}, {CPUs: "2-3", MemoryMiB: 256}}}
	}
	tests := []struct {
		name   string
		change func(*Machine)
		want   string
	}{
		{"zero threads", func(m *Machine) { m.ThreadsPerCore = 0 }, "at least 1"},
		{"no nodes", func(m *Machine) { m.Nodes = nil }, "no NUMA nodes"},
		{"bad list", func(m *Machine) { m.Nodes[0].CPUs = "0-x" }, `NUMA node 0: CPU list "0-x"`},
		{"missing CPU", func(m *Machine) { m.Nodes[1].CPUs = "2" }, "not all of its core's threads 2-3"},
		{"CPU twice", func(m *Machine) { m.Nodes[1].CPUs = "0-3" }, "CPUs 0-1 are already in another node"},
		{"CPU nowhere", func(m *Machine) { m.Nodes[1].CPUs = "" }, "CPUs 2-3 are in no NUMA node"},
		{"CPU beyond", func(m *Machine) { m.Nodes[1].CPUs = "2-5" }, "CPUs 4-5 do not exist"},
		{"tiny node", func(m *Machine) { m.Nodes[1].MemoryMiB = 8 }, "want at least 64"},
		{"maxcpus", func(m *Machine) { m.MaxCPUs = 9 }, "maxCPUs 9 is outside 0..4"},
		{"short distances", func(m *Machine) { m.Distances = [][]int{{10, 20}} }, "distance table has 1 rows"},
		{"asymmetric", func(m *Machine) { m.Distances = [][]int{{10, 20}, {21, 10}} }, "not symmetric"},
		{"local not 10", func(m *Machine) { m.Distances = [][]int{{11, 20}, {20, 10}} }, "to itself is 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			if err := m.Validate(); err != nil {
				t.Fatalf("base machine: %v", err)
			}
			tt.change(&m)
			err := m.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigValidateAndSelect(t *testing.T) {
	c, _ := Lookup("v2-2numa-smt")
	bad := c
	bad.Name = "Has Spaces"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "lower-case") {
		t.Errorf("bad name: %v", err)
	}
	bad = c
	bad.Jobs = []Job{{Package: "../elsewhere"}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "inside the module") {
		t.Errorf("package outside the module: %v", err)
	}
	bad = c
	bad.Cgroup = "v3"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `cgroup mode "v3"`) {
		t.Errorf("cgroup v3: %v", err)
	}
	bad = c
	bad.Jobs = []Job{{Package: "./bench/worker", Helper: true}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "helper ./bench/worker must be a program") {
		t.Errorf("helper test binary: %v", err)
	}
	bad.Jobs[0].Program = true
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "runs no packages") {
		t.Errorf("only helpers: %v", err)
	}
	if got := (Job{Package: "./bench/worker", Program: true}).GuestPath(); got != "/finegrain/bin/bench_worker.bin" {
		t.Errorf("GuestPath = %s", got)
	}
	if got, err := Select("v2-2numa-pinning-bench"); err != nil || len(got) != 1 {
		t.Errorf("Select of an extra configuration = %v, %v", got, err)
	}
	if _, err := Select("v2-2numa-smt,nope"); err == nil || !strings.Contains(err.Error(), `"nope"; known: v2-2numa-smt`) {
		t.Errorf("Select unknown: %v", err)
	}
	cfgs, err := OnlyPackages(Matrix(), "./test/vm")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != len(Matrix()) || len(cfgs[0].Jobs) != 1 || cfgs[0].Jobs[0].Package != "./test/vm" {
		t.Errorf("OnlyPackages(./test/vm) = %+v", cfgs)
	}
	if _, err := OnlyPackages(Matrix(), "pkg/topology"); err == nil || !strings.Contains(err.Error(), "./pkg/name") {
		t.Errorf("OnlyPackages without ./: %v", err)
	}
}

func TestWithTestRun(t *testing.T) {
	c, _ := Lookup("v2-2numa-smt")
	got := WithTestRun([]Config{c}, "^TestGuestCPU")
	want := []string{"-test.run", "^TestGuest", "-test.run", "^TestGuestCPU"}
	if diff := cmp.Diff(want, got[0].Jobs[0].Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if len(c.Jobs[0].Args) != 2 {
		t.Errorf("WithTestRun changed the original configuration: %v", c.Jobs[0].Args)
	}
}
