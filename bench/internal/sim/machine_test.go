package sim

import (
	"strings"
	"testing"
)

func TestLoadMachine(t *testing.T) {
	topo, name, err := LoadMachine("synthetic:2x1x1x18x1")
	if err != nil || name != "synthetic:2x1x1x18x1" || topo.NumCPUs() != 36 || len(topo.NUMANodes) != 2 || topo.NUMANodes[0].MemoryBytes != 64<<30 {
		t.Fatalf("synthetic paper node: %v %q %v", topo, name, err)
	}
	if topo, _, err = LoadMachine("synthetic:1x4x2x4x2:16"); err != nil || topo.NumCPUs() != 64 || topo.NUMANodes[3].MemoryBytes != 16<<30 {
		t.Fatalf("synthetic SMT node: %v", err)
	}
	fixture := paperMachine(t)
	if fixture.NumCPUs() != 36 || len(fixture.NUMANodes) != 2 {
		t.Errorf("fixture: %d CPUs, %d NUMA nodes", fixture.NumCPUs(), len(fixture.NUMANodes))
	}
	if _, name, _ := LoadMachine("../../../pkg/topology/testdata/xeon-e5-2697v4-2s/sys"); name != "xeon-e5-2697v4-2s" {
		t.Errorf("fixture name %q", name)
	}
	for _, tc := range []struct{ in, want string }{
		{"synthetic:2x1x18x1", "five counts"},
		{"synthetic:2x1x1x0x1", `count "0"`},
		{"synthetic:2x1x1xeighteenx1", `count "eighteen"`},
		{"synthetic:64x64x64x64x1", "more than the 65536"},
		{"synthetic:2x1x1x18x1:lots", `memory "lots"`},
		{"/nonexistent", "read it as a sysfs tree"},
	} {
		if _, _, err := LoadMachine(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestSelectStrategies(t *testing.T) {
	all, err := SelectStrategies(nil)
	if err != nil || len(all) != 19 {
		t.Fatalf("%d strategies, %v", len(all), err)
	}
	names := map[string]bool{}
	for _, s := range all {
		names[s.Name] = true
	}
	for _, n := range []string{"k8s", "k8s-per-node", "k8s-static", "k8s-static-besteffort", "finegrain", "finegrain-scale-least", "finegrain-none-most-exclusive", "finegrain-granularity-most"} {
		if !names[n] {
			t.Errorf("no strategy %s", n)
		}
	}
	got, err := SelectStrategies([]string{"finegrain", " k8s"})
	if err != nil || len(got) != 2 || got[0].Name != "finegrain" || got[1].Name != "k8s" {
		t.Errorf("selection: %+v, %v", got, err)
	}
	if _, err := SelectStrategies([]string{"k8s", "k8s"}); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := SelectStrategies([]string{"slurm"}); err == nil || !strings.Contains(err.Error(), `unknown strategy "slurm"; known: all, k8s,`) {
		t.Errorf("unknown: %v", err)
	}
}

// TestUserWorkers: the user's worker count is spec.workers, else the fewest workers that fit a
// NUMA node.
func TestUserWorkers(t *testing.T) {
	j := readTestTrace(t, "e2e-4jobs.yaml")[3]
	if got := userWorkers(&j, 18); got != 2 {
		t.Errorf("spec.workers 2: got %d", got)
	}
	j.Spec.Workers, j.Spec.Tasks = 0, 40
	if got := userWorkers(&j, 18); got != 3 {
		t.Errorf("40 tasks on 18-CPU NUMA nodes: %d workers, want 3", got)
	}
}
