package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/checkpoint"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// kernelTree is a kubepods tree on the kernel's cgroup v1 hierarchies, below a base the test
// owns; directories are made the way runc makes them (a new cpuset copies its parent's sets).
type kernelTree struct {
	t      *testing.T
	mounts cgroup.Mounts
	base   string
}

func (k *kernelTree) mkdir(rel string) {
	k.t.Helper()
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		dir := filepath.Join(k.mounts.Root(c), k.base, rel)
		if err := os.Mkdir(dir, 0o755); err != nil {
			k.t.Fatal(err)
		}
		if c != cgroup.CPUSet {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				k.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				k.t.Fatal(err)
			}
		}
	}
}

func (k *kernelTree) read(rel, file string) string {
	v, err := os.ReadFile(filepath.Join(k.mounts.Root(cgroup.CPUSet), k.base, rel, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(v))
}

func (k *kernelTree) cleanup() {
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		var dirs []string
		filepath.WalkDir(filepath.Join(k.mounts.Root(c), k.base), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	}
}

// kernelTest is a kubepods tree of the test's own on this machine's cgroup v1 hierarchies, and
// what an agent needs to run on it.
type kernelTest struct {
	t      *testing.T
	tree   *kernelTree
	mounts cgroup.Mounts
	topo   *topology.Topology
	layout cgroup.Layout
	fs     *cgroup.FS
	log    *slog.Logger
}

// newKernelTest skips unless the test runs as root on cgroup v1 with 2 CPUs, and makes the tree
// below a base named after prefix; it is removed when the test ends, once its cgroups are empty
// (a cleanup registered before others runs after them).
func newKernelTest(t *testing.T, prefix string) *kernelTest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil || m.Version != cgroup.V1 {
		t.Skipf("needs cgroup v1 cpuset, cpu and memory hierarchies (mounts %+v, %v)", m, err)
	}
	topo, err := topology.Discover("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if topo.OnlineCPUs.Size() < 2 {
		t.Skipf("needs at least 2 CPUs, the machine has %s", topo.OnlineCPUs)
	}
	k := &kernelTree{t: t, mounts: m, base: fmt.Sprintf("%s-%d", prefix, os.Getpid())}
	t.Cleanup(func() {
		top := filepath.Join(m.Root(cgroup.CPUSet), k.base)
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if k.cleanup(); !exists(top) {
				return
			}
		}
		t.Errorf("%s still exists 10 s after the test: a process is left in it", top)
	})
	for _, dir := range []string{"", "kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		k.mkdir(dir)
	}
	layout, err := cgroup.NewLayout(m, cgroup.Cgroupfs, k.base)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fsw, err := cgroup.NewFS(layout, log)
	if err != nil {
		t.Fatal(err)
	}
	return &kernelTest{t: t, tree: k, mounts: m, topo: topo, layout: layout, fs: fsw, log: log}
}

// kernelAgent is an agent running on a kernelTest's tree.
type kernelAgent struct {
	a        *Agent
	opts     Options
	client   *fake.Clientset
	resolver *fakeResolver
	ctx      context.Context
}

// run starts an agent on the tree with d's store, recorder and optional parts (the rest is the
// tree's: topology, writer, inotify watcher; a fake API server and runtime) and returns once it
// is ready; it stops when the test ends.
func (kt *kernelTest) run(d Deps) *kernelAgent {
	kt.t.Helper()
	return kt.runEvery(d, 100*time.Millisecond, 100*time.Millisecond)
}

// runEvery runs the agent as run does, reconciling every tick and confining Slurm jobs every
// confine.
func (kt *kernelTest) runEvery(d Deps, tick, confine time.Duration) *kernelAgent {
	t := kt.t
	t.Helper()
	ka := &kernelAgent{client: fake.NewClientset(), resolver: &fakeResolver{ids: map[string]cri.Identity{}}, opts: DefaultOptions()}
	ka.opts.NodeName, ka.opts.ReconcileInterval, ka.opts.SlurmConfineInterval = node, tick, confine
	d.Pods, d.Topology, d.Writer, d.Resolver, d.Log = ka.client.CoreV1().Pods(""), kt.topo, kt.fs, ka.resolver, kt.log
	d.Watcher = cgwatch.New(kt.layout, kt.log)
	d.KubeletPolicy = func() (kubeletpolicy.Result, error) { return kubeletpolicy.Result{}, nil }
	a, err := NewFromDeps(ka.opts, d)
	if err != nil {
		t.Fatal(err)
	}
	ka.a = a
	ctx, cancel := context.WithCancel(context.Background())
	ka.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	waitFor(t, func() bool { return a.Ready() == nil })
	return ka
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestAgentOnKernelCgroups runs the whole agent — inotify watcher, v1 write ordering, checkpoint
// file — on real cgroups of this machine: a worker's container is pinned when its cgroup appears,
// the shared containers exclude its CPU, and a hand-made drift is repaired.
func TestAgentOnKernelCgroups(t *testing.T) {
	kt := newKernelTest(t, "finegrain-agent-test")
	store, err := checkpoint.New(filepath.Join(t.TempDir(), "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	ka := kt.run(Deps{Store: store, Recorder: record.NewFakeRecorder(100)})
	a, k, m, client, resolver, topo, opts, ctx := ka.a, kt.tree, kt.mounts, ka.client, ka.resolver, kt.topo, ka.opts, ka.ctx

	sys := newPod("system", nil, "100m")
	sysDir := "kubepods/burstable/pod" + string(sys.UID) + "/" + hexID('1')
	k.mkdir("kubepods/burstable/pod" + string(sys.UID))
	k.mkdir(sysDir)
	w := newPod("worker", exclusiveLabel, "1")
	if _, err := client.CoreV1().Pods("ns").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.Snapshot().Pins) == 1 })
	pin := a.Snapshot().Pins[0]
	waitFor(t, func() bool { return k.read(sysDir, "cpuset.cpus") == a.Snapshot().Shared.String() })

	resolver.set(hexID('2'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	wDir := "kubepods/pod" + string(w.UID) + "/" + hexID('2')
	k.mkdir("kubepods/pod" + string(w.UID))
	start := time.Now()
	k.mkdir(wDir)
	waitFor(t, func() bool { return k.read(wDir, "cpuset.cpus") == pin.CPUs.String() })
	t.Logf("worker pinned to %s %s after its cgroup appeared (poll granularity 2 ms)", pin.CPUs, time.Since(start))
	if got := k.read(wDir, "cpuset.mems"); got != pin.Mems.String() {
		t.Errorf("worker cpuset.mems = %q, want %q", got, pin.Mems)
	}
	shared, err := cpuset.Parse(k.read(sysDir, "cpuset.cpus"))
	if err != nil || shared.Intersection(pin.CPUs).Size() != 0 {
		t.Errorf("shared container carries %s (%v), overlapping the pin %s", shared, err, pin.CPUs)
	}

	full := topo.OnlineCPUs.String()
	if err := os.WriteFile(filepath.Join(m.Root(cgroup.CPUSet), k.base, wDir, "cpuset.cpus"), []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitFor(t, func() bool { return k.read(wDir, "cpuset.cpus") == pin.CPUs.String() })
	t.Logf("drift repaired in %s (reconcile interval %s)", time.Since(start), opts.ReconcileInterval)

	data, err := store.Read()
	if err != nil || !strings.Contains(string(data), string(w.UID)) {
		t.Errorf("checkpoint %s lacks the worker (%v)", data, err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return k.read(sysDir, "cpuset.cpus") == topo.OnlineCPUs.String() })
}
