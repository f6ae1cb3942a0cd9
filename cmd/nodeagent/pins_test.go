package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// xeonRoot is the 2-socket Xeon E5-2697 v4 fixture (36 cores, no SMT, NUMA nodes 0 and 1).
var xeonRoot = filepath.Join("..", "..", "pkg", "topology", "testdata", "xeon-e5-2697v4-2s", "sys")

// xeonAllocator pins two containers on the fixture (node 0 = CPUs 0-17, node 1 = 18-35) with
// CPU 0 reserved: 8 CPUs get 1-8 on node 0, 16 CPUs on node 1 get 18-33.
func xeonAllocator(t *testing.T) (*topology.Topology, *policy.Allocator) {
	t.Helper()
	topo, err := topology.Discover(xeonRoot)
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0), MinSharedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []policy.Request{
		{Key: policy.Key{PodUID: "0b9d6d0e-1111-4000-8000-000000000001", Container: "rank"}, CPUs: 8},
		{Key: policy.Key{PodUID: "0b9d6d0e-1111-4000-8000-000000000002", Container: "rank"}, CPUs: 16, NUMANode: policy.OnNUMANode(1)},
	} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatal(err)
		}
	}
	return topo, a
}

func TestPinsFromEndpoint(t *testing.T) {
	_, a := xeonAllocator(t)
	snap := report.SnapshotOf(a, 3, func(uid string) (string, string) { return "hpc", "worker-" + uid[len(uid)-1:] })
	view := inspect.FromSnapshot("node-a", inspect.SourceAgent, snap, report.Options{})
	srv, err := inspect.New(inspect.Config{Gatherer: prometheus.NewRegistry(), Pins: func() inspect.Pins { return view }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	code, out, errOut := nodeagent("pins", "--endpoint", url, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got inspect.Pins
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(view, got); d != "" {
		t.Errorf("JSON differs from the agent's view (-agent +printed):\n%s", d)
	}

	code, out, errOut = nodeagent("pins", "--endpoint", url)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Node node-a (from agent): generation 3, shared pool 9-17,34-35, reserved 0",
		"0          18    17           9     9           9          9-17",
		"1          18    18           2     2           2          34-35",
		"hpc/worker-1             rank       exclusive  1-8         0     0",
		"hpc/worker-2             rank       exclusive  18-33       1     1",
		"(every other container)             shared     9-17,34-35  -     -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestPinsFromCheckpoint(t *testing.T) {
	topo, a := xeonAllocator(t)
	data, err := policy.EncodeCheckpoint(a.Checkpoint("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := nodeagent("pins", "--checkpoint", file, "--sysfs-root", xeonRoot, "--min-shared-cpus", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got inspect.Pins
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := inspect.FromSnapshot("node-a", inspect.SourceCheckpoint, report.SnapshotOf(a, 0, nil), report.Options{WholeCores: topo.ThreadsPerCore() > 1})
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("checkpoint view differs from the allocator's (-allocator +printed):\n%s", d)
	}

	if err := os.WriteFile(file, []byte(strings.Replace(string(data), `"1-8"`, `"1-9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := nodeagent("pins", "--checkpoint", file, "--sysfs-root", xeonRoot); code != 1 || !strings.Contains(errOut, "checksum") {
		t.Errorf("edited checkpoint: exit %d, %q; want 1 and a checksum error", code, errOut)
	}
	other := filepath.Join("..", "..", "pkg", "topology", "testdata", "vm-kvm-epyc-2cpu", "sys")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := nodeagent("pins", "--checkpoint", file, "--sysfs-root", other); code != 1 || !strings.Contains(errOut, "was written for machine") {
		t.Errorf("checkpoint of another machine: exit %d, %q; want 1 naming the mismatch", code, errOut)
	}
}

func TestPinsUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"pins", "--endpoint", "http://x", "--checkpoint", "f"},
		{"pins", "--sysfs-root", "/sys"},
		{"pins", "--checkpoint", "f", "--min-shared-cpus", "0"},
		{"pins", "-o", "yaml"},
		{"pins", "extra"},
	} {
		if code, _, errOut := nodeagent(args...); code != 2 || !strings.Contains(errOut, "nodeagent pins:") && !strings.Contains(errOut, "invalid value") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	if code, _, errOut := nodeagent("pins", "--endpoint", "http://127.0.0.1:1"); code != 1 || !strings.Contains(errOut, "is the node agent running here?") {
		t.Errorf("unreachable endpoint: exit %d, %q", code, errOut)
	}
}
