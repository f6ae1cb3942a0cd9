package threads

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"
)

// Thread is what the sampler saw of one thread between Start and the last sample.
type Thread struct {
	TID  int
	Comm string
	// Voluntary and Involuntary count the context switches during the window (the thread
	// blocked, or the scheduler preempted it).
	Voluntary, Involuntary uint64
	// RanOn holds the CPUs the thread was seen on while its run time grew.
	RanOn cpuset.CPUSet
	// Exited is set when the thread was gone by the last sample; its numbers end at the
	// last sample that saw it.
	Exited bool
}

// Sampler follows every thread of one process through procfs.
type Sampler struct {
	fs  procfs.FS
	pid int

	mu      sync.Mutex
	threads map[int]*seen
}

type seen struct {
	Thread
	baseVol, baseInvol uint64
	runNs              uint64
	alive              bool
}

// NewSampler reads the threads of process pid under procRoot (normally /proc).
func NewSampler(procRoot string, pid int) (*Sampler, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("open procfs at %s: %w", procRoot, err)
	}
	return &Sampler{fs: fs, pid: pid, threads: map[int]*seen{}}, nil
}

// Start takes the baseline: switches counted before it are excluded and a thread's CPU is
// recorded only once it runs after Start.
func (s *Sampler) Start() error { return s.sample(true) }

// Sample reads every thread once more.
func (s *Sampler) Sample() error { return s.sample(false) }

// Run samples every interval until ctx ends, then once more; it returns the first error.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.Sample()
		case <-t.C:
			if err := s.Sample(); err != nil {
				return err
			}
		}
	}
}

func (s *Sampler) sample(baseline bool) error {
	procs, err := s.fs.AllThreads(s.pid)
	if err != nil {
		return fmt.Errorf("list threads of process %d: %w", s.pid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, th := range s.threads {
		th.alive = false
	}
	for _, p := range procs {
		err := s.sampleThread(p, baseline)
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited while we read it
		}
		if err != nil {
			return fmt.Errorf("sample thread %d of process %d: %w", p.PID, s.pid, err)
		}
	}
	for _, th := range s.threads {
		th.Exited = !th.alive
	}
	return nil
}

func (s *Sampler) sampleThread(p procfs.Proc, baseline bool) error {
	// Run time first, processor second: a thread that wakes between the two reads then shows
	// the CPU it woke on, never a stale one it left before the run time grew.
	sched, err := p.Schedstat()
	if err != nil {
		return err
	}
	stat, err := p.Stat()
	if err != nil {
		return err
	}
	status, err := p.NewStatus()
	if err != nil {
		return err
	}
	th, known := s.threads[p.PID]
	if !known {
		th = &seen{Thread: Thread{TID: p.PID, Comm: stat.Comm, RanOn: cpuset.New()}}
		if baseline {
			th.baseVol, th.baseInvol, th.runNs = status.VoluntaryCtxtSwitches, status.NonVoluntaryCtxtSwitches, sched.RunningNanoseconds
		}
		s.threads[p.PID] = th
	}
	// A thread new since Start ran inside the window; a known one only if its run time grew.
	if !baseline && (!known || sched.RunningNanoseconds > th.runNs) {
		th.RanOn = th.RanOn.Union(cpuset.New(int(stat.Processor)))
	}
	th.runNs = sched.RunningNanoseconds
	th.Voluntary = status.VoluntaryCtxtSwitches - th.baseVol
	th.Involuntary = status.NonVoluntaryCtxtSwitches - th.baseInvol
	th.alive = true
	return nil
}

// Threads returns every thread seen, by thread id.
func (s *Sampler) Threads() []Thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Thread, 0, len(s.threads))
	for _, th := range s.threads {
		out = append(out, th.Thread)
	}
	slices.SortFunc(out, func(a, b Thread) int { return a.TID - b.TID })
	return out
}

// Totals sums the switches of every thread and unions the CPUs they ran on.
func Totals(ts []Thread) (voluntary, involuntary uint64, ranOn cpuset.CPUSet) {
	ranOn = cpuset.New()
	for _, t := range ts {
		voluntary += t.Voluntary
		involuntary += t.Involuntary
		ranOn = ranOn.Union(t.RanOn)
	}
	return voluntary, involuntary, ranOn
}
