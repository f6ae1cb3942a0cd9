package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// pinned is one exclusive container a node's agent publishes.
type pinned struct {
	pod      string
	cpus     int
	numaNode int
}

// nrtWith builds the NodeResourceTopology an agent on a 2-socket machine of four single-thread
// cores per socket (NUMA node 0 = CPUs 0-3, 1 = 4-7) publishes with the given pins of namespace
// hpc, container "worker".
func nrtWith(t *testing.T, node string, pins ...pinned) *unstructured.Unstructured {
	t.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 1, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0), MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pins {
		if _, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: "uid-" + p.pod, Container: "worker"}, CPUs: p.cpus, NUMANode: policy.OnNUMANode(topology.NUMAID(p.numaNode))}); err != nil {
			t.Fatal(err)
		}
	}
	snap := report.SnapshotOf(a, 4, func(uid string) (string, string) { return "hpc", strings.TrimPrefix(uid, "uid-") })
	obj, err := report.Build(report.NodeRef{Name: node, UID: types.UID("uid-" + node)}, topo, snap, report.Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func hpcJob(t *testing.T, ns, name string, phase v1alpha1.Phase, placements ...v1alpha1.WorkerPlacement) *unstructured.Unstructured {
	t.Helper()
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.HPCJobStatus{Phase: phase, Workers: int32(len(placements)), Placements: placements})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "creationTimestamp": testNow.Add(-90 * time.Minute).Format(time.RFC3339)},
		"spec":     map[string]any{"tasks": int64(8), "futureField": "the lead may add spec fields; job only reads the status"},
		"status":   status,
	}}
}

func agentPodOn(name, node, phase string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": defaultAgentNamespace, "labels": map[string]any{"app.kubernetes.io/name": "finegrain-nodeagent"}},
		"spec":     map[string]any{"nodeName": node},
		"status":   map[string]any{"phase": phase},
	}}
}

// fakeAgents answers execs like the node agents: from the processes they hold per node, only
// for the pods asked with --pod; fail maps an agent pod to the error its exec returns.
type fakeAgents struct {
	mu    sync.Mutex
	calls []string
	node  map[string]string
	held  map[string][]inspect.ContainerProcesses
	fail  map[string]error
	raw   map[string]string
}

func (f *fakeAgents) Exec(_ context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%s[%s]: %s", namespace, pod, container, strings.Join(command, " ")))
	if err := f.fail[pod]; err != nil {
		fmt.Fprintln(stderr, "some stderr")
		return err
	}
	if raw, ok := f.raw[pod]; ok {
		_, err := io.WriteString(stdout, raw)
		return err
	}
	var asked []string
	for i, arg := range command {
		if arg == "--pod" {
			asked = append(asked, command[i+1])
		}
	}
	v := inspect.Processes{Node: f.node[pod], PerContainer: 1024, PerListing: 4096, Containers: []inspect.ContainerProcesses{}}
	for _, c := range f.held[pod] {
		if slices.Contains(asked, c.Namespace+"/"+c.Pod) {
			v.Containers = append(v.Containers, c)
		}
	}
	return json.NewEncoder(stdout).Encode(v)
}

func rank(r int) *int { return &r }

// lammpsCluster is a running job of four workers: two on node-a (whose agent answers), one on
// node-b (whose agent refuses the exec), one on node-c (no agent, no NodeResourceTopology).
func lammpsCluster(t *testing.T, phase v1alpha1.Phase) (env, *fakeAgents) {
	t.Helper()
	job := hpcJob(t, "hpc", "lammps", phase,
		v1alpha1.WorkerPlacement{Worker: "lammps-worker-0", Tasks: 2, Group: 0, Node: "node-a", NUMANode: 0},
		v1alpha1.WorkerPlacement{Worker: "lammps-worker-1", Tasks: 2, Group: 0, Node: "node-a", NUMANode: 1},
		v1alpha1.WorkerPlacement{Worker: "lammps-worker-2", Tasks: 2, Group: 1, Node: "node-b", NUMANode: 0},
		v1alpha1.WorkerPlacement{Worker: "lammps-worker-3", Tasks: 2, Group: 1, Node: "node-c", NUMANode: 1},
	)
	other := hpcJob(t, "hpc", "other", v1alpha1.PhaseRunning, v1alpha1.WorkerPlacement{Worker: "other-worker-0", Tasks: 1, Node: "node-a", NUMANode: 1})
	agents := &fakeAgents{
		node: map[string]string{"finegrain-nodeagent-a": "node-a"},
		held: map[string][]inspect.ContainerProcesses{"finegrain-nodeagent-a": {
			{Namespace: "hpc", Pod: "lammps-worker-0", PodUID: "uid-lammps-worker-0", Container: "worker", ContainerID: "containerd://aa",
				CPUs: "1-2", Mems: "0", Written: true, Listed: 4, Processes: []inspect.Process{
					{PID: 4100, Command: "sshd", CPUs: "1-2", Mems: "0"},
					{PID: 4180, Command: "orted", CPUs: "1-2", Mems: "0"},
					{PID: 4242, Command: "lmp", Rank: rank(0), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "1", Mems: "0"},
					{PID: 4243, Command: "lmp", Rank: rank(1), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "2", Mems: "0"},
				}},
			{Namespace: "hpc", Pod: "lammps-worker-1", PodUID: "uid-lammps-worker-1", Container: "worker", ContainerID: "containerd://bb",
				CPUs: "4-5", Mems: "1", NUMANode: 1, Written: true, Listed: 2, Processes: []inspect.Process{
					{PID: 5242, Command: "lmp", Rank: rank(2), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "4-5", Mems: "1"},
					{PID: 5243, Command: "lmp", Rank: rank(3), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "4-5", Mems: "1"},
				}},
			{Namespace: "hpc", Pod: "other-worker-0", PodUID: "uid-other-worker-0", Container: "worker", ContainerID: "containerd://cc",
				CPUs: "6", Mems: "1", NUMANode: 1, Written: true, Listed: 1, Processes: []inspect.Process{{PID: 6000, Command: "secret-app", CPUs: "6", Mems: "1"}}},
		}},
		fail: map[string]error{"finegrain-nodeagent-b": apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "finegrain-nodeagent-b", errors.New(`User "alice" cannot create resource "pods/exec"`))},
	}
	cluster := fakeCluster(job, other,
		nrtWith(t, "node-a", pinned{"lammps-worker-0", 2, 0}, pinned{"lammps-worker-1", 2, 1}, pinned{"other-worker-0", 1, 1}),
		nrtWith(t, "node-b", pinned{"lammps-worker-2", 2, 0}),
		agentPodOn("finegrain-nodeagent-a", "node-a", "Running"),
		agentPodOn("finegrain-nodeagent-old", "node-a", "Failed"),
		agentPodOn("finegrain-nodeagent-b", "node-b", "Running"),
	)
	cluster.exec = func(clientcmd.ClientConfig) (podExec, error) { return agents, nil }
	return cluster, agents
}

// golden compares out with testdata/name, rewriting it with -update.
func golden(t *testing.T, name, out string) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), out); d != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", file, d)
	}
}

func TestJobShowsWorkersPinsAndRanks(t *testing.T) {
	cluster, agents := lammpsCluster(t, v1alpha1.PhaseRunning)
	code, out, errOut := plugin(cluster, "job", "lammps", "-n", "hpc")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "job-running.txt", out)
	slices.Sort(agents.calls)
	want := []string{
		"finegrain-system/finegrain-nodeagent-a[nodeagent]: /usr/local/bin/nodeagent pins --processes -o json --pod hpc/lammps-worker-0 --pod hpc/lammps-worker-1",
		"finegrain-system/finegrain-nodeagent-b[nodeagent]: /usr/local/bin/nodeagent pins --processes -o json --pod hpc/lammps-worker-2",
	}
	if d := cmp.Diff(want, agents.calls); d != "" {
		t.Errorf("execs (-want +got):\n%s", d)
	}

	code, out, errOut = plugin(cluster, "job", "lammps", "-n", "hpc", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "job-running.json", out)
	var v jobView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Workers) != 4 || len(v.Workers[0].Processes) != 1 || v.Workers[0].Processes[0].Processes[2].Rank == nil {
		t.Errorf("JSON view = %+v", v)
	}
	if strings.Contains(out, "secret-app") {
		t.Error("job shows the processes of another job's worker")
	}
}

func TestJobNotRunningShowsPlacementsOnly(t *testing.T) {
	cluster, agents := lammpsCluster(t, v1alpha1.PhaseSucceeded)
	code, out, errOut := plugin(cluster, "job", "lammps", "-n", "hpc")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "job-succeeded.txt", out)
	if len(agents.calls) != 0 {
		t.Errorf("asked the agents of a finished job: %v", agents.calls)
	}
}

func TestJobAgentProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*fakeAgents)
		want string
	}{
		{"not JSON", func(f *fakeAgents) {
			f.raw = map[string]string{"finegrain-nodeagent-a": "nodeagent: unknown flag --processes\n"}
		},
			"processes not shown: processes from the node agent finegrain-system/finegrain-nodeagent-a on node-a are not a finegrain processes view"},
		{"other node", func(f *fakeAgents) { f.node["finegrain-nodeagent-a"] = "node-z" },
			`processes not shown: the node agent finegrain-system/finegrain-nodeagent-a on node-a answered for node "node-z"; check --agent-selector`},
		{"exec fails", func(f *fakeAgents) {
			f.fail["finegrain-nodeagent-a"] = errors.New("command terminated with exit code 1")
		},
			"processes not shown: ask the node agent finegrain-system/finegrain-nodeagent-a on node-a: command terminated with exit code 1: some stderr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, agents := lammpsCluster(t, v1alpha1.PhaseRunning)
			tt.set(agents)
			code, out, errOut := plugin(cluster, "job", "lammps", "-n", "hpc")
			if code != 0 || !strings.Contains(out, "lammps-worker-0: "+tt.want) {
				t.Errorf("exit %d, stderr %q; want a note %q:\n%s", code, errOut, tt.want, out)
			}
		})
	}
}

func TestJobFlagsFindTheAgents(t *testing.T) {
	job := hpcJob(t, "hpc", "lammps", v1alpha1.PhaseRunning, v1alpha1.WorkerPlacement{Worker: "lammps-worker-0", Tasks: 1, Node: "node-a"})
	pod := agentPodOn("agent-x", "node-a", "Running")
	pod.SetNamespace("ops")
	pod.SetLabels(map[string]string{"app": "agent"})
	cluster := fakeCluster(job, pod, nrtWith(t, "node-a", pinned{"lammps-worker-0", 1, 0}))
	agents := &fakeAgents{node: map[string]string{"agent-x": "node-a"}}
	cluster.exec = func(clientcmd.ClientConfig) (podExec, error) { return agents, nil }
	code, out, errOut := plugin(cluster, "job", "lammps", "-n", "hpc", "--agent-namespace", "ops", "--agent-selector", "app=agent", "--agent-container", "agent")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := []string{"ops/agent-x[agent]: /usr/local/bin/nodeagent pins --processes -o json --pod hpc/lammps-worker-0"}; !slices.Equal(agents.calls, want) {
		t.Errorf("execs %q, want %q", agents.calls, want)
	}
	if !strings.Contains(out, "lammps-worker-0: the node agent on node-a holds no pinned container of this worker") {
		t.Errorf("table lacks the note for an agent without the worker:\n%s", out)
	}
}

// TestJobNamespaceFromKubeconfig runs without -n: the kubeconfig context's namespace counts.
func TestJobNamespaceFromKubeconfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: hpc}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster, _ := lammpsCluster(t, v1alpha1.PhaseSucceeded)
	code, out, errOut := plugin(cluster, "job", "lammps", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.HasPrefix(out, "HPCJob hpc/lammps: Succeeded") {
		t.Errorf("exit %d, %q:\n%s", code, errOut, out)
	}
}

func TestJobsList(t *testing.T) {
	cluster, _ := lammpsCluster(t, v1alpha1.PhaseRunning)
	objs := []runtime.Object{hpcJob(t, "batch", "hpl", v1alpha1.PhasePending)}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		c, _ := cluster.client(nil)
		if _, err := c.Resource(v1alpha1.GroupVersionResource).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := plugin(cluster, "jobs", "-n", "hpc")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "NAME    PHASE    WORKERS  NODES                 AGE\n" +
		"lammps  Running  4        node-a,node-b,node-c  90m\n" +
		"other   Running  1        node-a                90m\n"
	if out != want {
		t.Errorf("jobs -n hpc:\n%s\nwant:\n%s", out, want)
	}
	code, out, errOut = plugin(cluster, "jobs", "-A", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Jobs []jobSummary }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range got.Jobs {
		names = append(names, fmt.Sprintf("%s/%s %s %d %v", j.Namespace, j.Name, j.Phase, j.Workers, j.Nodes))
	}
	if d := cmp.Diff([]string{"batch/hpl Pending 0 []", "hpc/lammps Running 4 [node-a node-b node-c]", "hpc/other Running 1 [node-a]"}, names); d != "" {
		t.Errorf("jobs -A (-want +got):\n%s", d)
	}
	code, out, _ = plugin(cluster, "jobs", "-A")
	if code != 0 || !strings.HasPrefix(out, "NAMESPACE  NAME    PHASE    WORKERS  NODES") {
		t.Errorf("jobs -A table:\n%s", out)
	}
}

func TestJobErrors(t *testing.T) {
	cluster, _ := lammpsCluster(t, v1alpha1.PhaseRunning)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"job"}, 2, "kubectl finegrain job: want one job name\n"},
		{[]string{"job", "lammps", "-A"}, 2, "kubectl finegrain job: unknown shorthand flag: 'A' in -A"},
		{[]string{"jobs", "x"}, 2, `kubectl finegrain jobs: unexpected argument "x"`},
		{[]string{"job", "x", "--agent-selector", "a b"}, 2, `kubectl finegrain job: --agent-selector "a b": `},
		{[]string{"job", "absent", "-n", "hpc"}, 1, "HPCJob hpc/absent not found"},
	} {
		code, _, errOut := plugin(cluster, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
	broken := hpcJob(t, "hpc", "broken", v1alpha1.PhaseRunning)
	broken.Object["status"] = map[string]any{"placements": "not a list"}
	c := fakeCluster(broken)
	c.exec = func(clientcmd.ClientConfig) (podExec, error) { return &fakeAgents{}, nil }
	if code, _, errOut := plugin(c, "job", "broken", "-n", "hpc"); code != 1 || !strings.Contains(errOut, "HPCJob hpc/broken: status is not an HPCJob status") {
		t.Errorf("broken status: exit %d, %q", code, errOut)
	}
}

func TestBoundedBufferKeepsTheStart(t *testing.T) {
	b := &boundedBuffer{max: 4}
	for _, s := range []string{"abc", "def", "g"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want every byte taken", s, n, err)
		}
	}
	if string(b.buf) != "abcd" || !b.truncated {
		t.Errorf("buffer %q, truncated %t; want \"abcd\" and true", b.buf, b.truncated)
	}
}
