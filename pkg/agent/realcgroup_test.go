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

// TestAgentOnKernelCgroups runs the whole agent — inotify watcher, v1 write ordering, checkpoint
// file — on real cgroups of this machine: a worker's container is pinned when its cgroup appears,
// the shared containers exclude its CPU, and a hand-made drift is repaired.
func TestAgentOnKernelCgroups(t *testing.T) {
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
	k := &kernelTree{t: t, mounts: m, base: fmt.Sprintf("finegrain-agent-test-%d", os.Getpid())}
	t.Cleanup(k.cleanup)
	k.mkdir("")
	k.mkdir("kubepods")
	k.mkdir("kubepods/burstable")
	k.mkdir("kubepods/besteffort")
	layout, err := cgroup.NewLayout(m, cgroup.Cgroupfs, k.base)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fsw, err := cgroup.NewFS(layout, log)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.New(filepath.Join(t.TempDir(), "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	resolver := &fakeResolver{ids: map[string]cri.Identity{}}
	opts := DefaultOptions()
	opts.NodeName, opts.ReconcileInterval = node, 100*time.Millisecond
	a, err := NewFromDeps(opts, Deps{Pods: client.CoreV1().Pods(""), Topology: topo, Writer: fsw, Store: store, Resolver: resolver,
		Watcher: cgwatch.New(layout, log), Recorder: record.NewFakeRecorder(100), Log: log,
		KubeletPolicy: func() (kubeletpolicy.Result, error) { return kubeletpolicy.Result{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	waitFor(t, func() bool { return a.Ready() == nil })

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
