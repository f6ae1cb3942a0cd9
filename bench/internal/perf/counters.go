package perf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Reading is one counter's raw value together with the times the kernel reports for it; the
// counter ran for Running of the Enabled nanoseconds (less when the PMU was multiplexed).
type Reading struct {
	Value, Enabled, Running uint64
}

// Counter is one open counter on one thread, counting the threads that thread creates
// afterwards too.
type Counter interface {
	Enable() error
	Disable() error
	Read() (Reading, error)
	Close() error
}

// Opener opens one counter on one thread. Kernel is the real one; tests pass a fake.
type Opener interface {
	Open(ev Event, tid int) (Counter, error)
}

// ThreadLister returns the thread ids of the process being measured.
type ThreadLister func() ([]int, error)

// Value is the process-wide count of one event.
type Value struct {
	Event Event
	// Count is the sum over all threads, scaled up for multiplexing when Scaled is set. It is
	// meaningless when Unavailable is non-nil.
	Count  uint64
	Scaled bool
	// Unavailable says why the kernel gave no count (an *UnavailableError), nil otherwise.
	Unavailable error
}

// Set holds every requested event open on every thread of one process.
type Set struct {
	events []*eventCounters
}

type eventCounters struct {
	ev          Event
	counters    []Counter
	unavailable error
}

// maxListRounds bounds how often Open re-lists threads that appeared while it was opening
// counters; threads created after the last round are counted through inheritance.
const maxListRounds = 20

// Open opens each event on each thread that list returns, disabled until Enable. It lists the
// threads again until no new thread appears, so every thread either has its own counter or was
// created by a thread that has one (perf_event_attr.inherit). An event the kernel refuses is
// kept as unavailable with the reason; Open fails only when the threads cannot be listed.
func Open(op Opener, events []Event, list ThreadLister) (*Set, error) {
	s := &Set{}
	for _, ev := range events {
		s.events = append(s.events, &eventCounters{ev: ev})
	}
	seen := map[int]bool{}
	for range maxListRounds {
		tids, err := list()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("list threads to count: %w", err)
		}
		fresh := slices.DeleteFunc(slices.Clone(tids), func(tid int) bool { return seen[tid] })
		if len(fresh) == 0 {
			return s, nil
		}
		for _, tid := range fresh {
			seen[tid] = true
			for _, ec := range s.events {
				ec.open(op, tid)
			}
		}
	}
	s.Close()
	return nil, fmt.Errorf("threads kept appearing after %d listings; cannot cover them all with counters", maxListRounds)
}

func (ec *eventCounters) open(op Opener, tid int) {
	if ec.unavailable != nil {
		return
	}
	c, err := op.Open(ec.ev, tid)
	switch {
	case err == nil:
		ec.counters = append(ec.counters, c)
	case isThreadGone(err):
		// The thread exited between listing and opening; it has nothing left to count.
	default:
		// A partial set of threads would undercount, so the event is unavailable as a whole.
		ec.closeAll()
		ec.unavailable = unavailable(ec.ev, tid, err)
	}
}

func (ec *eventCounters) closeAll() {
	for _, c := range ec.counters {
		_ = c.Close()
	}
	ec.counters = nil
}

// Enable starts every counter.
func (s *Set) Enable() error { return s.each("enable", Counter.Enable) }

// Disable stops every counter; Read afterwards returns the counts of the enabled interval.
func (s *Set) Disable() error { return s.each("disable", Counter.Disable) }

func (s *Set) each(what string, f func(Counter) error) error {
	var errs []error
	for _, ec := range s.events {
		for _, c := range ec.counters {
			if err := f(c); err != nil {
				errs = append(errs, fmt.Errorf("%s counter %s: %w", what, ec.ev.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Read returns one Value per requested event, in the order given to Open.
func (s *Set) Read() ([]Value, error) {
	out := make([]Value, 0, len(s.events))
	for _, ec := range s.events {
		v := Value{Event: ec.ev, Unavailable: ec.unavailable}
		if ec.unavailable == nil {
			var err error
			v.Count, v.Scaled, err = sum(ec.counters)
			if errors.Is(err, errNeverScheduled) {
				v.Unavailable = &UnavailableError{Event: ec.ev.Name, Reason: err.Error()}
			} else if err != nil {
				return nil, fmt.Errorf("read counter %s: %w", ec.ev.Name, err)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

var errNeverScheduled = errors.New("the PMU was busy (multiplexed) for the whole run; the event was never counted")

// sum adds the counts of every thread, scaling each by Enabled/Running when the kernel
// multiplexed it, the way perf stat does.
func sum(cs []Counter) (total uint64, scaled bool, err error) {
	for _, c := range cs {
		r, err := c.Read()
		if err != nil {
			return 0, false, err
		}
		switch {
		case r.Running == r.Enabled:
			total += r.Value
		case r.Running == 0:
			return 0, false, errNeverScheduled
		default:
			total += uint64(float64(r.Value) * float64(r.Enabled) / float64(r.Running))
			scaled = true
		}
	}
	return total, scaled, nil
}

// Close releases every counter; the Set is unusable afterwards.
func (s *Set) Close() {
	for _, ec := range s.events {
		ec.closeAll()
	}
}

// TaskLister lists the threads of process pid from <procRoot>/<pid>/task.
func TaskLister(procRoot string, pid int) ThreadLister {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	return func() ([]int, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		tids := make([]int, 0, len(entries))
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				return nil, fmt.Errorf("unexpected entry %q in %s: %w", e.Name(), dir, err)
			}
			tids = append(tids, tid)
		}
		return tids, nil
	}
}
