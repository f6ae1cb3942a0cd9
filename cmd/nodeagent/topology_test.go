package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/finegrain-dev/finegrain/internal/cli/clitest"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// sysfsFixtures returns the sysfs trees under pkg/topology/testdata.
func sysfsFixtures(t *testing.T) []string {
	t.Helper()
	roots, err := filepath.Glob(filepath.Join("..", "..", "pkg", "topology", "testdata", "*", "sys"))
	if err != nil || len(roots) < 6 {
		t.Fatalf("want at least six sysfs fixtures, found %d (%v)", len(roots), err)
	}
	return roots
}

func nodeagent(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestTopologyJSONOnEveryFixture runs the command on every fixture and checks that its JSON is the
// topology Discover reads beside the hardware ReadHardware reads, and that it decodes back into
// the same topology.
func TestTopologyJSONOnEveryFixture(t *testing.T) {
	for _, root := range sysfsFixtures(t) {
		t.Run(filepath.Base(filepath.Dir(root)), func(t *testing.T) {
			code, out, errOut := nodeagent("topology", "--sysfs-root", root, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			want, err := topology.Discover(root)
			if err != nil {
				t.Fatal(err)
			}
			hw, err := topology.ReadHardware(root, want)
			if err != nil {
				t.Fatal(err)
			}
			var view topology.HostView
			if err := json.Unmarshal([]byte(out), &view); err != nil {
				t.Fatalf("output is not the JSON view: %v\n%s", err, out)
			}
			if diff := cmp.Diff(want.View(), view.View); diff != "" {
				t.Errorf("JSON differs from Discover (-discover +json):\n%s", diff)
			}
			if diff := cmp.Diff(hw.View(), view.HardwareView); diff != "" {
				t.Errorf("JSON differs from ReadHardware (-read +json):\n%s", diff)
			}
			var back topology.Topology
			if err := json.Unmarshal([]byte(out), &back); err != nil {
				t.Fatalf("JSON does not decode into a topology: %v", err)
			}
			if diff := cmp.Diff(view.View, back.View()); diff != "" {
				t.Errorf("the topology changed in a round trip (-json +decoded):\n%s", diff)
			}
		})
	}
}

func TestTopologyTableOnEveryFixture(t *testing.T) {
	for _, root := range sysfsFixtures(t) {
		code, out, errOut := nodeagent("topology", "--sysfs-root", root)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", root, code, errOut)
		}
		if !strings.HasPrefix(out, "Machine: ") || !strings.Contains(out, "\nSocket 0: CPUs ") || !strings.Contains(out, "  NUMA node ") ||
			!strings.Contains(out, "\nCaches:\n  L1d: ") || !strings.Contains(out, "\nNUMA memory:\n  node 0 size: ") ||
			!strings.Contains(out, "\nnode distances:\n") || !strings.Contains(out, "\nPCI devices:") {
			t.Errorf("%s: table lacks the machine, socket, NUMA node, cache, memory, distance or PCI lines:\n%s", root, out)
		}
	}
}

func TestTopologyPaperNodeTable(t *testing.T) {
	root := filepath.Join("..", "..", "pkg", "topology", "testdata", "xeon-e5-2697v4-2s", "sys")
	code, out, errOut := nodeagent("topology", "--sysfs-root", root, "-o", "table")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range []string{
		"Machine: 36 CPUs online (0-35), 2 sockets, 2 NUMA nodes, 36 cores, 1 thread per core, 2 L3 groups",
		"Socket 0: CPUs 0-17",
		"  NUMA node 0: CPUs 0-17, memory 62.8 GiB, distances node0=10 node1=21",
		"    L3 group 0 (45.0 MiB): CPUs 0-17",
		"      core 5 (core_id 8): CPUs 5",
		"      core 35 (core_id 27): CPUs 35",
		"  L1d: 32.0 KiB × 36 (1 CPU each)",
		"  L3: 45.0 MiB × 2 (18 CPUs each)",
		"  node 0 size: 62.8 GiB free: 61.5 GiB",
		"node    0   1",
		"   1:  21  10",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
}

func TestTopologyLiveHost(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skipf("this machine has no sysfs at /sys: %v", err)
	}
	code, out, errOut := nodeagent("topology", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var view topology.HostView
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.OnlineCPUs == "" || len(view.NUMANodes) == 0 || len(view.NUMAMemory) != len(view.NUMANodes) {
		t.Fatalf("live JSON %q does not describe a machine (%v)", out, err)
	}
}

func TestTopologyErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-sys")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topology", "--sysfs-root", missing}, 1, filepath.Join(missing, "devices/system/cpu/online")},
		{[]string{"topology", "-o", "yaml"}, 2, `"yaml" is not an output format; want table or json`},
		{[]string{"topology", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"topology", "--sysfs"}, 2, "nodeagent topology: unknown flag: --sysfs\n"},
		{[]string{"topology", "-sysfs-root", "/sys"}, 2, "nodeagent topology: -sysfs-root: long flags take two dashes: --sysfs-root\n"},
		{[]string{"topolgy"}, 2, `nodeagent: unknown command "topolgy" (did you mean topology?)`},
		{nil, 2, "nodeagent: no command given; want one of pins, run, simulate, topology, version\n\nUsage:\n  nodeagent COMMAND [flags]"},
	}
	for _, tc := range tests {
		code, _, errOut := nodeagent(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("nodeagent %q = exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestHelp: the program and each of its commands print their help on stdout and succeed.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  nodeagent COMMAND [flags]", "  run       run the node agent", "  topology  print the machine's", "  version   print the program's version", "Run 'nodeagent COMMAND --help'"}},
		{[]string{"help"}, []string{"  simulate  run exclusive CPU requests"}},
		{[]string{"-h"}, []string{"  pins      show exclusive and shared CPUs"}},
		{[]string{"topology", "-h"}, []string{"Prints the machine as finegrain schedules onto it", "Usage:\n  nodeagent topology [--sysfs-root DIR] [-o table|json]\n", "--sysfs-root DIR", `DIR laid out like /sys to read the machine from (default "/sys")`, "-o, --output format", "output format: table or json (default table)"}},
		{[]string{"simulate", "--help"}, []string{"--request N[@K]", "--release I", "  --request N@K   N exclusive CPUs on NUMA node K\n", "\n                     [-o table|json] (--request N[@K] | --release I)...\n"}},
		{[]string{"pins", "-h"}, []string{"nodeagent pins --processes [--pod NAMESPACE/NAME]...", "--pod NAMESPACE/NAME", `--endpoint URL`, "(default 5s)"}},
		{[]string{"run", "-h"}, []string{"--nri-socket string"}},
		{[]string{"version", "-h"}, []string{"Prints nodeagent's version", "-o, --output string"}},
	} {
		clitest.Help(t, nodeagent, tc.args, tc.want...)
	}
}

func TestVersion(t *testing.T) { clitest.Version(t, "nodeagent", nodeagent) }
