package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/cli/clitest"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// published builds the object an agent on a 2-socket, 4-core, 2-thread machine (core i = CPUs
// i, i+8) publishes with core 0 reserved and hpc/lammps-0 pinned on 2 CPUs of NUMA node 0.
func published(t *testing.T, name string, generation uint64) (*unstructured.Unstructured, inspect.Pins) {
	t.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0, 8), MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: "u1", Container: "rank"}, CPUs: 2}); err != nil {
		t.Fatal(err)
	}
	snap := report.SnapshotOf(a, generation, func(string) (string, string) { return "hpc", "lammps-0" })
	obj, err := report.Build(report.NodeRef{Name: name, UID: types.UID("uid-" + name)}, topo, snap, report.Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(testNow.Add(-3 * time.Second))
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: report.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &at}}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	v := inspect.FromSnapshot(name, inspect.SourceNRT, snap, report.Options{WholeCores: true})
	v.ReservedCPUs, v.Fingerprint, v.UpdatedAt = "", nrt.PodsFingerprint([]nrt.PodName{{Namespace: "hpc", Name: "lammps-0"}}), &at.Time
	for i := range v.NUMANodes {
		v.NUMANodes[i].FreeCores = nil
	}
	for i := range v.Containers {
		v.Containers[i].PodUID = ""
	}
	return u, v
}

func node(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Node")
	u.SetName(name)
	return u
}

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fakeCluster(objs ...runtime.Object) env {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource:      "NodeResourceTopologyList",
		nodesResource:                 "NodeList",
		v1alpha1.GroupVersionResource: "HPCJobList",
		podsResource:                  "PodList",
	}, objs...)
	return env{
		client: func(clientcmd.ClientConfig) (dynamic.Interface, error) { return client, nil },
		exec:   func(clientcmd.ClientConfig) (podExec, error) { return nil, errors.New("no exec in this test") },
		now:    func() time.Time { return testNow },
	}
}

func plugin(e env, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut, e)
	return code, out.String(), errOut.String()
}

func TestNodeShowsPublishedMap(t *testing.T) {
	u, want := published(t, "node-a", 7)
	cluster := fakeCluster(u, node("node-a"))

	code, out, errOut := plugin(cluster, "node", "node-a", "-o", "json", "--context", "whatever")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got inspect.Pins
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("node JSON differs from the agent's state (-agent +plugin):\n%s", d)
	}

	code, out, errOut = plugin(cluster, "node", "node-a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range []string{
		"Node node-a (from NodeResourceTopology): generation 7, shared pool 2-7,10-15",
		"  updated 3s ago (2026-03-01T11:59:57Z)",
		"0          8     6            4     -           4          2-3,10-11",
		"1          8     8            8     -           8          4-7,12-15",
		"hpc/lammps-0             rank       exclusive  1,9        0     0",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
}

func TestNodesListsEveryNodeWithProblems(t *testing.T) {
	a, _ := published(t, "node-a", 7)
	broken, _ := published(t, "node-b", 2)
	zones, _, _ := unstructured.NestedSlice(broken.Object, "zones")
	zones[0].(map[string]any)["attributes"] = []any{}
	if err := unstructured.SetNestedSlice(broken.Object, zones, "zones"); err != nil {
		t.Fatal(err)
	}
	orphan, _ := published(t, "node-gone", 1)
	cluster := fakeCluster(a, broken, orphan, node("node-a"), node("node-b"), node("node-c"))

	code, out, errOut := plugin(cluster, "nodes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		"NODE       GENERATION  UPDATED  PINNED  AVAILABLE  FREE CPUS",
		"node-a     7           3s ago   1       0:4 1:8    0:2-3,10-11 1:4-7,12-15",
		"node-b     -           -        -       -          NodeResourceTopology node-b: zone node-0 has no finegrain.dev/free-cpus attribute",
		"node-c     -           -        -       -          no NodeResourceTopology: no finegrain node agent publishes for this node",
		"node-gone  1           3s ago   1       0:4 1:8    0:2-3,10-11 1:4-7,12-15",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want[i])
		}
	}

	code, out, errOut = plugin(cluster, "nodes", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Nodes []nodeSummary }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 4 || got.Nodes[3].Problem != "no Node of this name: the object outlived its node" || got.Nodes[0].Pins == nil || got.Nodes[0].Pins.Generation != 7 {
		t.Errorf("nodes JSON = %s", out)
	}
}

func TestCommandLineErrors(t *testing.T) {
	cluster := fakeCluster()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "kubectl finegrain: no command given; want one of job, jobs, node, nodes, version\n"},
		{[]string{"pods"}, 2, `kubectl finegrain: unknown command "pods"`},
		{[]string{"node"}, 2, "kubectl finegrain node: want one node name\n"},
		{[]string{"nodes", "x"}, 2, `kubectl finegrain nodes: unexpected argument "x"`},
		{[]string{"nodes", "-o", "yaml"}, 2, `kubectl finegrain nodes: --output "yaml": want table or json`},
		{[]string{"nodes", "--no-such-flag"}, 2, "kubectl finegrain nodes: unknown flag: --no-such-flag"},
		{[]string{"nodes", "-kubeconfig", "x"}, 2, "kubectl finegrain nodes: -kubeconfig: long flags take two dashes: --kubeconfig"},
		{[]string{"nodes", "-A"}, 2, "unknown shorthand flag: 'A' in -A"},
		{[]string{"node", "node-z"}, 1, "kubectl finegrain node: node node-z has no NodeResourceTopology"},
	} {
		code, out, errOut := plugin(cluster, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want %d and %q", tt.args, code, errOut, out, tt.code, tt.want)
		}
	}
}

// TestGlobalFlags: the kubeconfig flags go before or after the command, as with kubectl.
func TestGlobalFlags(t *testing.T) {
	u, _ := published(t, "node-a", 7)
	cluster := fakeCluster(u, node("node-a"))
	for _, args := range [][]string{
		{"--context", "whatever", "node", "node-a", "--timeout", "5s"},
		{"node", "--request-timeout=5s", "node-a", "-n", "x"},
	} {
		if code, out, errOut := plugin(cluster, args...); code != 0 || !strings.Contains(out, "Node node-a (from NodeResourceTopology)") {
			t.Errorf("%q: exit %d, %q\n%s", args, code, errOut, out)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	cluster := fakeCluster()
	run := func(args ...string) (int, string, string) { return plugin(cluster, args...) }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Shows what finegrain's node agents publish", "Usage:\n  kubectl finegrain COMMAND [flags]\n",
			"  job      one HPCJob", "  jobs     one line per HPCJob", "  node     one node in detail", "  nodes    one line per node", "  version  print the program's version",
			"--kubeconfig string", "-n, --namespace string", "--context string", "--timeout duration", "(default 30s)", "Run 'kubectl finegrain COMMAND --help'"}},
		{[]string{"help"}, []string{"Usage:\n  kubectl finegrain COMMAND [flags]\n"}},
		{[]string{"nodes", "-h"}, []string{"Prints one line per node", "Usage:\n  kubectl finegrain nodes [-o table|json]\n", "-o, --output string", `(default "table")`, "Global flags:", "--kubeconfig string"}},
		{[]string{"node", "--help"}, []string{"Usage:\n  kubectl finegrain node NAME [-o table|json]\n"}},
		{[]string{"jobs", "-h"}, []string{"Usage:\n  kubectl finegrain jobs [-n NAMESPACE | -A] [-o table|json]\n", "-A, --all-namespaces"}},
		{[]string{"job", "-h"}, []string{"Usage:\n  kubectl finegrain job NAME [-n NAMESPACE] [-o table|json]\n", "--agent-namespace string", `(default "finegrain-system")`, "--agent-selector string", "--agent-container string"}},
		{[]string{"version", "--help"}, []string{"Prints kubectl-finegrain's version"}},
	} {
		clitest.Help(t, run, tc.args, tc.want...)
	}
	clitest.Version(t, "kubectl-finegrain", run)
}
