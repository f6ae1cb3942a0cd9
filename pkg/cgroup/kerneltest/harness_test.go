package kerneltest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// helperEnv makes the test binary act as a workload: "<threads>:<sleep|light|busy>".
const helperEnv = "FINEGRAIN_CGROUP_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		helperMain(spec)
		return
	}
	if spec := os.Getenv(readerEnv); spec != "" {
		readerMain(spec)
		return
	}
	os.Exit(m.Run())
}

// helperMain runs n OS threads that sleep ("sleep"), spin 1 ms in 20 ("light") or spin without
// pause ("busy"), prints "ready" once they all exist, and exits when stdin closes.
func helperMain(spec string) {
	ns, mode, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "helper: bad spec %q\n", spec)
		os.Exit(2)
	}
	for i := 0; i < n; i++ {
		go func() {
			runtime.LockOSThread()
			for {
				switch mode {
				case "busy":
					spin(10 * time.Millisecond)
				case "light":
					spin(time.Millisecond)
					time.Sleep(19 * time.Millisecond)
				default:
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err == nil && len(tasks) > n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// proc is a running helper process.
type proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	threads int
	pid     int
}

// kernel is one test's private cgroup tree on the real kernel.
type kernel struct {
	t       testing.TB
	version cgroup.Version
	layout  cgroup.Layout
	fs      *cgroup.FS
	online  cpuset.CPUSet
	mems    cpuset.CPUSet
	mu      sync.Mutex
	created []string
	procs   []*proc
}

// newKernel checks that the host can run the test on version v and builds an empty test-owned
// subtree; it skips with a reason otherwise. Cleanup kills the helpers and removes every cgroup
// the test created, deepest first.
func newKernel(t testing.TB, v cgroup.Version, d cgroup.Driver) *kernel {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no usable cgroup mounts: %v", err)
	}
	if m.Version != v {
		t.Skipf("this host carries cpuset, cpu and memory on %s, so the %s variant cannot run here; it runs on a host or qemu guest (make test-vm) that carries them on %s", m.Version, v, v)
	}
	top := fmt.Sprintf("finegrain-test-%d", os.Getpid())
	base := filepath.Join(top, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	l, err := cgroup.NewLayout(m, d, base)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cgroup.NewFS(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	k := &kernel{t: t, version: v, layout: l, fs: w}
	t.Cleanup(k.cleanup)
	root := m.Root(cgroup.CPUSet)
	if v == cgroup.V1 {
		k.online = k.readSet(root, "cpuset.effective_cpus")
		k.mems = k.readSet(root, "cpuset.effective_mems")
	} else {
		k.online = k.readSet(root, "cpuset.cpus.effective")
		k.mems = k.readSet(root, "cpuset.mems.effective")
		sub := k.read(root, "cgroup.subtree_control")
		for _, c := range []string{"cpuset", "cpu", "memory"} {
			if !slices.Contains(strings.Fields(sub), c) {
				t.Skipf("the cgroup2 root does not delegate %s (cgroup.subtree_control is %q); enable it with: echo '+cpuset +cpu +memory' > %s/cgroup.subtree_control (the VM runner's init does)", c, sub, root)
			}
		}
	}
	if k.online.Size() < 2 {
		t.Skipf("needs at least 2 online CPUs, the host has %s", k.online)
	}
	for _, h := range k.hierarchies() {
		k.mkdirAll(filepath.Join(h, base))
	}
	return k
}

// hierarchies returns the distinct mount points of the cpuset, cpu and memory controllers.
func (k *kernel) hierarchies() []string {
	if k.version == cgroup.V2 {
		return []string{k.layout.Mounts.Unified}
	}
	m := k.layout.Mounts.V1
	return []string{m[cgroup.CPUSet], m[cgroup.CPU], m[cgroup.Memory]}
}

// mkdirAll creates the missing cgroups down to dir the way the kubelet and runc do: on v1 a new
// cpuset copies its parent's cpus and mems, on v2 the parent delegates the controllers.
func (k *kernel) mkdirAll(dir string) {
	k.t.Helper()
	if _, err := os.Stat(dir); err == nil {
		return
	}
	parent := filepath.Dir(dir)
	k.mkdirAll(parent)
	if k.version == cgroup.V2 && !slices.Contains(strings.Fields(k.read(parent, "cgroup.subtree_control")), "cpuset") {
		if !slices.Contains(k.created, parent) {
			k.t.Fatalf("%s does not delegate cpuset and is not the test's to change", parent)
		}
		k.write(parent, "cgroup.subtree_control", "+cpuset +cpu +memory")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	k.created = append(k.created, dir)
	k.mu.Unlock()
	if k.version == cgroup.V1 && strings.HasPrefix(dir, k.layout.Mounts.V1[cgroup.CPUSet]+"/") {
		k.write(dir, "cpuset.cpus", k.read(parent, "cpuset.cpus"))
		k.write(dir, "cpuset.mems", k.read(parent, "cpuset.mems"))
	}
}

// addContainer creates a container's cgroup (and its pod's) in every hierarchy.
func (k *kernel) addContainer(ref cgroup.ContainerRef) {
	k.t.Helper()
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		dir, err := k.layout.ContainerDir(c, ref)
		if err != nil {
			k.t.Fatal(err)
		}
		k.mkdirAll(dir)
	}
}

// dirs returns the container's directories, one per hierarchy.
func (k *kernel) dirs(ref cgroup.ContainerRef) []string {
	k.t.Helper()
	var out []string
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		dir, err := k.layout.ContainerDir(c, ref)
		if err != nil {
			k.t.Fatal(err)
		}
		if !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return out
}

// removeContainer removes a container's cgroups as its runtime does after the container exits.
func (k *kernel) removeContainer(ref cgroup.ContainerRef) {
	k.t.Helper()
	for _, dir := range k.dirs(ref) {
		if err := rmdir(dir); err != nil {
			k.t.Fatal(err)
		}
	}
}

// child starts this test binary again as a helper process, its role given by the environment
// entry env (helperEnv or readerEnv), killed with the test; it returns the pipes to its stdin
// and stdout.
func (k *kernel) child(env string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	k.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	return cmd, stdin, stdout
}

// start runs a helper with n threads and moves it into dirs (its container's cgroups).
func (k *kernel) start(n int, mode string, dirs ...string) *proc {
	k.t.Helper()
	cmd, stdin, stdout := k.child(fmt.Sprintf("%s=%d:%s", helperEnv, n, mode))
	p := &proc{cmd: cmd, stdin: stdin, threads: n, pid: cmd.Process.Pid}
	k.mu.Lock()
	k.procs = append(k.procs, p)
	k.mu.Unlock()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("helper said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			k.t.Fatalf("helper %d: %v", p.pid, err)
		}
	case <-time.After(20 * time.Second):
		k.t.Fatalf("helper %d not ready after 20 s", p.pid)
	}
	for _, dir := range dirs {
		k.write(dir, "cgroup.procs", strconv.Itoa(p.pid))
	}
	return p
}

// kill9 kills a helper with SIGKILL and reaps it.
func (k *kernel) kill9(p *proc) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// verify checks every thread of p with sched_getaffinity and /proc/<pid>/task/<tid>/status.
func (k *kernel) verify(p *proc, cpus, mems cpuset.CPUSet) {
	k.t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid))
	if err != nil {
		k.t.Fatal(err)
	}
	if len(tasks) <= p.threads {
		k.t.Fatalf("helper %d has %d threads, want more than %d", p.pid, len(tasks), p.threads)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			k.t.Fatalf("sched_getaffinity(%d): %v", tid, err)
		}
		var got []int
		for c := 0; c < len(set)*64; c++ {
			if set.IsSet(c) {
				got = append(got, c)
			}
		}
		if aff := cpuset.New(got...); !aff.Equals(cpus) {
			k.t.Errorf("helper %d thread %d: sched_getaffinity = %s, want %s", p.pid, tid, aff, cpus)
		}
		status := k.read(fmt.Sprintf("/proc/%d/task/%d", p.pid, tid), "status")
		for _, f := range []struct {
			key  string
			want cpuset.CPUSet
		}{{"Cpus_allowed_list", cpus}, {"Mems_allowed_list", mems}} {
			if got := statusField(k.t, status, f.key); !got.Equals(f.want) {
				k.t.Errorf("helper %d thread %d: %s = %s, want %s", p.pid, tid, f.key, got, f.want)
			}
		}
	}
}

func statusField(t testing.TB, status, key string) cpuset.CPUSet {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			set, err := cpuset.Parse(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			return set
		}
	}
	t.Fatalf("no %s in status", key)
	return cpuset.CPUSet{}
}

func (k *kernel) read(dir, file string) string {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		k.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (k *kernel) readSet(dir, file string) cpuset.CPUSet {
	k.t.Helper()
	set, err := cpuset.Parse(k.read(dir, file))
	if err != nil {
		k.t.Fatal(err)
	}
	return set
}

func (k *kernel) write(dir, file, content string) {
	k.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		k.t.Fatalf("write %q to %s: %v", content, filepath.Join(dir, file), err)
	}
}

// cleanup kills the helpers, then removes the created cgroups deepest first, the test-owned
// top directory last (v1 may report a cgroup busy for a moment after its last task exits).
func (k *kernel) cleanup() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.procs {
		_ = p.stdin.Close()
		k.kill9(p)
	}
	for i := len(k.created) - 1; i >= 0; i-- {
		if err := rmdir(k.created[i]); err != nil {
			k.t.Errorf("cleanup: %v", err)
		}
	}
}

// rmdir removes one cgroup, retrying while the kernel still reports it busy; a cgroup that is
// already gone is fine.
func rmdir(dir string) error {
	var err error
	for i := 0; i < 200; i++ {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("rmdir %s: %w", dir, err)
}
