package threads

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// procTree is a writable fake /proc holding one process's threads.
type procTree struct {
	t    *testing.T
	root string
	pid  int
}

// set writes the three files the sampler reads for one thread.
func (p procTree) set(tid, processor int, runNs, vol, invol uint64) {
	p.t.Helper()
	dir := filepath.Join(p.root, fmt.Sprint(p.pid), "task", fmt.Sprint(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	// Fields 3..52 of /proc/PID/stat; field 39 is the processor the thread last ran on.
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[0] = "R"
	fields[39-3] = fmt.Sprint(processor)
	files := map[string]string{
		"stat":      fmt.Sprintf("%d (worker) %s\n", tid, strings.Join(fields, " ")),
		"schedstat": fmt.Sprintf("%d 0 1\n", runNs),
		"status": fmt.Sprintf("Name:\tworker\nPid:\t%d\nvoluntary_ctxt_switches:\t%d\nnonvoluntary_ctxt_switches:\t%d\n",
			tid, vol, invol),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p procTree) remove(tid int) {
	if err := os.RemoveAll(filepath.Join(p.root, fmt.Sprint(p.pid), "task", fmt.Sprint(tid))); err != nil {
		p.t.Fatal(err)
	}
}

func TestSamplerFollowsThreads(t *testing.T) {
	p := procTree{t: t, root: t.TempDir(), pid: 100}
	p.set(100, 0, 1000, 5, 1) // main thread, ran before the window
	p.set(101, 1, 500, 2, 0)  // idle helper thread that never runs in the window
	s, err := NewSampler(p.root, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	p.set(100, 0, 2000, 6, 3)
	p.set(102, 1, 10, 1, 0) // created during the window
	if err := s.Sample(); err != nil {
		t.Fatal(err)
	}
	p.set(100, 1, 3000, 6, 4) // migrated to CPU 1
	p.remove(102)             // exited
	if err := s.Sample(); err != nil {
		t.Fatal(err)
	}
	want := []Thread{
		{TID: 100, Comm: "worker", Voluntary: 1, Involuntary: 3, RanOn: cpuset.New(0, 1)},
		{TID: 101, Comm: "worker", RanOn: cpuset.New()},
		{TID: 102, Comm: "worker", Voluntary: 1, RanOn: cpuset.New(1), Exited: true},
	}
	got := s.Threads()
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })); d != "" {
		t.Errorf("threads (-want +got):\n%s", d)
	}
	vol, invol, ranOn := Totals(got)
	if vol != 2 || invol != 3 || ranOn.String() != "0-1" {
		t.Errorf("totals = %d, %d, %s; want 2, 3, 0-1", vol, invol, ranOn)
	}
}

func TestSamplerNamesProcessWhenGone(t *testing.T) {
	s, err := NewSampler(t.TempDir(), 4242)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if err == nil || !strings.Contains(err.Error(), "process 4242") {
		t.Fatalf("got %v, want an error naming process 4242", err)
	}
}

// TestSamplerSeesRealThread pins a locked thread to one CPU, lets it run and block, and checks
// the sampler saw it there and counted its voluntary switches. The window starts once the thread
// is locked and pinned: a thread the runtime makes after Start gets its baseline at the first
// Sample, and the switches before that would not count.
func TestSamplerSeesRealThread(t *testing.T) {
	s, err := NewSampler("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	allowed, err := Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	cpu := allowed.List()[allowed.Size()-1]
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer func() {
		var all unix.CPUSet
		for _, c := range allowed.List() {
			all.Set(c)
		}
		_ = unix.SchedSetaffinity(0, &all)
	}()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		time.Sleep(time.Millisecond)
	}
	spin(20 * time.Millisecond)
	if err := s.Sample(); err != nil {
		t.Fatal(err)
	}
	for _, th := range s.Threads() {
		if th.TID != tid {
			continue
		}
		if !th.RanOn.Equals(cpuset.New(cpu)) {
			t.Errorf("thread %d pinned to CPU %d was seen on %s", tid, cpu, th.RanOn)
		}
		if th.Voluntary < 5 {
			t.Errorf("thread %d slept 5 times but shows %d voluntary switches", tid, th.Voluntary)
		}
		return
	}
	t.Fatalf("thread %d not sampled", tid)
}

func spin(d time.Duration) {
	x := 1.0
	for start := time.Now(); time.Since(start) < d; {
		x = x*1.0000001 + 1e-9
	}
	runtime.KeepAlive(x)
}

func TestInitAffinityMatchesStart(t *testing.T) {
	atInit, err := InitAffinity()
	if err != nil {
		t.Fatal(err)
	}
	now, err := Affinity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if atInit.IsEmpty() || !atInit.Equals(now) {
		t.Errorf("affinity at init %q, main thread now %q; want the same non-empty set", atInit, now)
	}
}
