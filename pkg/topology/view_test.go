package topology

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func discoverFixture(t testing.TB, name string) *Topology {
	t.Helper()
	topo, err := Discover(fixtureRoot(name))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestViewJSONContract pins the public field names and formats of `nodeagent topology -o json`.
func TestViewJSONContract(t *testing.T) {
	data, err := json.Marshal(discoverFixture(t, "xeon-e5-2697v4-2s"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"onlineCPUs":"0-35","sockets":[{"id":0,"cpus":"0-17","numaNodes":[0]},{"id":1,"cpus":"18-35","numaNodes":[1]}],`,
		`"numaNodes":[{"id":0,"cpus":"0-17","memoryBytes":67421863936,"distances":[10,21],"l3Groups":[0]},`,
		`"cores":[{"id":0,"socket":0,"numaNode":0,"cpus":"0","coreID":0,"die":0,"l3Group":0},`,
		`{"id":5,"socket":0,"numaNode":0,"cpus":"5","coreID":8,"die":0,"l3Group":0}`,
		`"l3Groups":[{"id":0,"cpus":"0-17","numaNode":0,"sizeBytes":47185920},{"id":1,"cpus":"18-35","numaNode":1,"sizeBytes":47185920}],`,
		`"isolatedCPUs":"","offlineCPUs":"","threadsPerCore":1}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s\nJSON: %s", want, data)
		}
	}

	data, err = json.Marshal(discoverFixture(t, "xeon-e2278g-offline-isolcpus"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"isolatedCPUs":"2-5,10-13","offlineCPUs":"14-15","threadsPerCore":2}`; !strings.Contains(string(data), want) {
		t.Errorf("JSON lacks %s\nJSON: %s", want, data)
	}
}

// TestViewRoundTrip decodes every fixture's JSON back into a Topology and checks nothing was lost.
func TestViewRoundTrip(t *testing.T) {
	for _, w := range fixtureWants {
		t.Run(w.name, func(t *testing.T) {
			topo := discoverFixture(t, w.name)
			data, err := json.Marshal(topo)
			if err != nil {
				t.Fatal(err)
			}
			var back Topology
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(topo.View(), back.View()); diff != "" {
				t.Errorf("view changed in a JSON round trip (-before +after):\n%s", diff)
			}
			again, err := json.Marshal(&back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, again) {
				t.Errorf("JSON changed in a round trip:\n%s\n%s", data, again)
			}
			checkFixture(t, &back, w)
		})
	}
}

func TestViewRejectsInconsistentJSON(t *testing.T) {
	base := discoverFixture(t, "xeon-gold-6248-2s-smt").View()
	tests := []struct {
		name   string
		change func(v *View)
		want   string
	}{
		{"socket list", func(v *View) { v.Sockets[1].CPUs = "20-39" }, `socket 1 cpus is "20-39"`},
		{"online list", func(v *View) { v.OnlineCPUs = "0-80" }, "onlineCPUs"},
		{"malformed core list", func(v *View) { v.Cores[3].CPUs = "3,,43" }, "core 3 cpus"},
		{"unordered nodes", func(v *View) { v.NUMANodes[0], v.NUMANodes[1] = v.NUMANodes[1], v.NUMANodes[0] }, "ascending ID order"},
		{"short distances", func(v *View) { v.NUMANodes[1].Distances = []int{21} }, "NUMA node 1 has 1 distances"},
		{"isolated offline CPU", func(v *View) { v.IsolatedCPUs = "80" }, "not online"},
		{"threads per core", func(v *View) { v.ThreadsPerCore = 1 }, "threadsPerCore"},
		{"node list", func(v *View) { v.NUMANodes[0].CPUs = "0-19" }, "NUMA node 0 cpus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(base)
			if err != nil {
				t.Fatal(err)
			}
			var v View
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			tc.change(&v)
			data, err = json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var topo Topology
			err = json.Unmarshal(data, &topo)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Unmarshal = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, discoverFixture(t, "vm-kvm-epyc-2cpu")); err != nil {
		t.Fatal(err)
	}
	want := `Machine: 2 CPUs online (0-1), 1 socket, 1 NUMA node, 2 cores, 1 thread per core, 1 L3 group
  offline CPUs: none
  isolated CPUs: none
Socket 0: CPUs 0-1
  NUMA node 0: CPUs 0-1, memory 10.8 GiB, distances node0=10
    L3 group 0 (32.0 MiB): CPUs 0-1
      core 0 (core_id 0): CPUs 0
      core 1 (core_id 1): CPUs 1
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		fixture string
		lines   []string
	}{
		{"xeon-e5-2697v4-2s", []string{
			"Machine: 36 CPUs online (0-35), 2 sockets, 2 NUMA nodes, 36 cores, 1 thread per core, 2 L3 groups",
			"Socket 1: CPUs 18-35",
			"  NUMA node 1: CPUs 18-35, memory 63.0 GiB, distances node0=21 node1=10",
			"    L3 group 1 (45.0 MiB): CPUs 18-35",
			"      core 23 (core_id 8): CPUs 23",
		}},
		{"epyc-7451-2s-smt", []string{
			"  NUMA node 1: CPUs 6-11,54-59, memory 31.5 GiB, distances node0=16 node1=10 node2=16 node3=16 node4=32 node5=32 node6=32 node7=32",
			"    L3 group 3 (8.0 MiB): CPUs 9-11,57-59",
			"      core 11 (core_id 14): CPUs 11,59",
		}},
		{"xeon-e2278g-offline-isolcpus", []string{
			"  offline CPUs: 14-15",
			"  isolated CPUs: 2-5,10-13",
			"      core 6 (core_id 6): CPUs 6",
		}},
		{"xeon-max-9480-2s-hbm-flat", []string{
			"NUMA node 2 (memory only): memory 63.8 GiB, distances node0=13 node1=23 node2=10 node3=23",
			"NUMA node 3 (memory only): memory 63.8 GiB, distances node0=23 node1=13 node2=23 node3=10",
		}},
	} {
		b.Reset()
		if err := WriteTable(&b, discoverFixture(t, tc.fixture)); err != nil {
			t.Fatal(err)
		}
		got := strings.Split(b.String(), "\n")
		for _, line := range tc.lines {
			if !contains(got, line) {
				t.Errorf("%s: table lacks line %q\n%s", tc.fixture, line, b.String())
			}
		}
	}
}

func contains(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}

// TestQueriesDoNotAllocate keeps the allocator's hot path allocation-free.
func TestQueriesDoNotAllocate(t *testing.T) {
	topo := discoverFixture(t, "epyc-7451-2s-smt")
	queries := map[string]func(){
		"CPU":             func() { topo.CPU(53) },
		"Siblings":        func() { topo.Siblings(53) },
		"CoresOfNUMANode": func() { topo.CoresOfNUMANode(5) },
		"CoresOfL3Group":  func() { topo.CoresOfL3Group(9) },
		"Distance":        func() { topo.Distance(1, 6) },
		"CPUsOfNUMANode":  func() { topo.CPUsOfNUMANode(3) },
		"NUMANodeOfCPU":   func() { topo.NUMANodeOfCPU(90) },
		"NUMANode":        func() { topo.NUMANode(7) },
		"Socket":          func() { topo.Socket(1) },
	}
	for name, q := range queries {
		if n := testing.AllocsPerRun(100, q); n != 0 {
			t.Errorf("%s allocates %.0f times per call", name, n)
		}
	}
}
