package perf

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requirePerf skips when this kernel or user cannot open even a software counter.
func requirePerf(t *testing.T) {
	t.Helper()
	c, err := Kernel{}.Open(SoftwareEvents[0], 0)
	if err != nil {
		t.Skipf("perf_event_open unusable here (%v): needs CONFIG_PERF_EVENTS and root or perf_event_paranoid ≤ 1", err)
	}
	_ = c.Close()
}

// TestKernelCountsSoftwareEvents runs known work on a locked thread and checks the process-wide
// software counters saw it, and that hardware events are either counted or unavailable with a
// reason, never a silent zero.
func TestKernelCountsSoftwareEvents(t *testing.T) {
	requirePerf(t)
	s, err := Open(Kernel{}, DefaultEvents(), TaskLister("/proc", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	const pages = 4096
	migrated := doKnownWork(t, pages)
	if err := s.Disable(); err != nil {
		t.Fatal(err)
	}
	vs, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Value{}
	for _, v := range vs {
		got[v.Event.Name] = v
		t.Logf("%-16s count=%d scaled=%v unavailable=%v", v.Event.Name, v.Count, v.Scaled, v.Unavailable)
	}
	atLeast := map[string]uint64{
		"task-clock":       uint64(30 * time.Millisecond),
		"context-switches": 10,
		"page-faults":      pages,
	}
	if migrated {
		atLeast["cpu-migrations"] = 1
	}
	for name, min := range atLeast {
		v := got[name]
		if v.Unavailable != nil {
			t.Errorf("%s unavailable: %v", name, v.Unavailable)
		} else if v.Count < min {
			t.Errorf("%s = %d, want ≥ %d", name, v.Count, min)
		}
	}
	for _, ev := range HardwareEvents {
		v := got[ev.Name]
		var ue *UnavailableError
		switch {
		case v.Unavailable == nil && v.Count == 0 && ev.Name != "LLC-load-misses":
			t.Errorf("%s counted 0 after real work", ev.Name)
		case v.Unavailable != nil && (!errors.As(v.Unavailable, &ue) || ue.Reason == ""):
			t.Errorf("%s unavailable without a reason: %v", ev.Name, v.Unavailable)
		}
	}
}

// doKnownWork burns CPU, sleeps (voluntary switches), faults in fresh pages and, when allowed
// on two CPUs, moves itself between them. It reports whether it migrated.
func doKnownWork(t *testing.T, pages int) bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	burnThreadCPU(t, 50*time.Millisecond)
	for i := 0; i < 20; i++ {
		time.Sleep(time.Millisecond)
	}
	mem, err := unix.Mmap(-1, 0, pages*os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(mem) }()
	_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE) // one fault per small page
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 1
	}
	return migrate(t)
}

// burnThreadCPU computes until this thread has used d of CPU time, however busy the machine.
func burnThreadCPU(t *testing.T, d time.Duration) {
	used := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	x := 1.0
	for start := used(); used()-start < d; {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	if x == 0 {
		t.Log(x)
	}
}

func migrate(t *testing.T) bool {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil || orig.Count() < 2 {
		return false
	}
	defer func() { _ = unix.SchedSetaffinity(0, &orig) }()
	var cpus []int
	for cpu := 0; len(cpus) < 2; cpu++ {
		if orig.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	for _, cpu := range []int{cpus[0], cpus[1], cpus[0]} {
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Logf("cannot move to CPU %d: %v", cpu, err)
			return false
		}
	}
	return true
}
