package perf

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// fakeKernel stands in for a kernel without a PMU: hardware events fail with ENOENT, software
// ones return the readings configured per thread.
type fakeKernel struct {
	readings map[string]map[int]Reading // event → tid → reading
	openErr  map[int]error              // tid → error for every event
	opened   []string
	enabled  int
	closed   int
}

type fakeCounter struct {
	k   *fakeKernel
	r   Reading
	err error
}

func (c *fakeCounter) Enable() error          { c.k.enabled++; return nil }
func (c *fakeCounter) Disable() error         { return nil }
func (c *fakeCounter) Read() (Reading, error) { return c.r, c.err }
func (c *fakeCounter) Close() error           { c.k.closed++; return nil }

func (k *fakeKernel) Open(ev Event, tid int) (Counter, error) {
	if err := k.openErr[tid]; err != nil {
		return nil, err
	}
	if ev.Type != unix.PERF_TYPE_SOFTWARE {
		return nil, fmt.Errorf("perf_event_open %s: %w", ev.Name, unix.ENOENT)
	}
	k.opened = append(k.opened, fmt.Sprintf("%s@%d", ev.Name, tid))
	return &fakeCounter{k: k, r: k.readings[ev.Name][tid]}, nil
}

func staticThreads(tids ...int) ThreadLister {
	return func() ([]int, error) { return tids, nil }
}

type row struct {
	Name        string
	Count       uint64
	Scaled      bool
	Unavailable string
}

func rows(t *testing.T, vs []Value) []row {
	t.Helper()
	var out []row
	for _, v := range vs {
		r := row{Name: v.Event.Name, Count: v.Count, Scaled: v.Scaled}
		if v.Unavailable != nil {
			r.Unavailable = v.Unavailable.Error()
			r.Count = 0
		}
		out = append(out, r)
	}
	return out
}

func TestSetSumsThreadsAndReportsMissingPMU(t *testing.T) {
	k := &fakeKernel{readings: map[string]map[int]Reading{
		"task-clock":       {10: {Value: 1000, Enabled: 50, Running: 50}, 11: {Value: 500, Enabled: 50, Running: 50}},
		"context-switches": {10: {Value: 3, Enabled: 50, Running: 50}, 11: {Value: 4, Enabled: 50, Running: 50}},
		"cpu-migrations":   {10: {Value: 0, Enabled: 50, Running: 50}},
		"page-faults":      {10: {Value: 100, Enabled: 100, Running: 50}, 11: {Value: 1, Enabled: 10, Running: 10}},
	}}
	s, err := Open(k, DefaultEvents(), staticThreads(10, 11))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	if k.enabled != 8 {
		t.Errorf("enabled %d counters, want 4 events × 2 threads", k.enabled)
	}
	vs, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	noPMU := "unavailable: ENOENT: the kernel offers no such event on this machine (no hardware PMU exposed, common in virtual machines)"
	want := []row{
		{Name: "task-clock", Count: 1500},
		{Name: "context-switches", Count: 7},
		{Name: "cpu-migrations", Count: 0},
		{Name: "page-faults", Count: 201, Scaled: true},
		{Name: "cycles", Unavailable: "cycles " + noPMU},
		{Name: "instructions", Unavailable: "instructions " + noPMU},
		{Name: "LLC-loads", Unavailable: "LLC-loads " + noPMU},
		{Name: "LLC-load-misses", Unavailable: "LLC-load-misses " + noPMU},
	}
	if d := cmp.Diff(want, rows(t, vs)); d != "" {
		t.Errorf("values (-want +got):\n%s", d)
	}
	for _, v := range vs[4:] {
		if !errors.Is(v.Unavailable, unix.ENOENT) {
			t.Errorf("%s: unavailable error %v does not match ENOENT", v.Event.Name, v.Unavailable)
		}
	}
}

func TestSetCoversThreadsThatAppearWhileOpening(t *testing.T) {
	k := &fakeKernel{}
	calls := 0
	list := func() ([]int, error) {
		calls++
		if calls == 1 {
			return []int{1}, nil
		}
		return []int{1, 2}, nil
	}
	s, err := Open(k, SoftwareEvents[:1], list)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := cmp.Diff([]string{"task-clock@1", "task-clock@2"}, k.opened); d != "" {
		t.Errorf("opened (-want +got):\n%s", d)
	}
}

func TestSetSkipsExitedThreadsAndDropsPartialEvents(t *testing.T) {
	k := &fakeKernel{openErr: map[int]error{
		2: unix.ESRCH,  // exited between listing and opening
		3: unix.EACCES, // refused: the whole event must go, not undercount
	}}
	s, err := Open(k, SoftwareEvents[:1], staticThreads(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vs, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(vs[0].Unavailable, unix.EACCES) {
		t.Fatalf("task-clock: got %+v, want unavailable with EACCES", vs[0])
	}
	if k.closed != 1 {
		t.Errorf("closed %d counters, want the one opened on thread 1", k.closed)
	}
}

func TestSetNeverScheduledIsUnavailableNotZero(t *testing.T) {
	k := &fakeKernel{readings: map[string]map[int]Reading{
		"task-clock": {1: {Value: 0, Enabled: 1000, Running: 0}},
	}}
	s, err := Open(k, SoftwareEvents[:1], staticThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vs, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Unavailable == nil {
		t.Fatalf("got count %d, want unavailable (never scheduled)", vs[0].Count)
	}
}

func TestSetFailsWhenThreadsCannotBeListed(t *testing.T) {
	_, err := Open(&fakeKernel{}, SoftwareEvents, func() ([]int, error) { return nil, errors.New("no /proc") })
	if err == nil {
		t.Fatal("Open succeeded without a thread list")
	}
}

func TestSetFailsWhenThreadsNeverSettle(t *testing.T) {
	next := 0
	list := func() ([]int, error) { next++; return []int{next}, nil }
	if _, err := Open(&fakeKernel{}, SoftwareEvents[:1], list); err == nil {
		t.Fatal("Open succeeded although every listing showed a new thread")
	}
}

func TestReadErrorNamesEvent(t *testing.T) {
	s := &Set{events: []*eventCounters{{ev: SoftwareEvents[0], counters: []Counter{&fakeCounter{k: &fakeKernel{}, err: unix.EIO}}}}}
	_, err := s.Read()
	if err == nil || !errors.Is(err, unix.EIO) {
		t.Fatalf("got %v, want an error wrapping EIO", err)
	}
}
