package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// traceClasses are the simulated cluster's PriorityClasses: one default class of the highest
// value, under which each job's priority from the trace (its spec.priority, which may only lower
// the class's) is its effective priority, as the placer computes it.
var traceClasses = priority.Static{Values: map[string]int32{"trace": math.MaxInt32}, DefaultName: "trace"}

// Options describe the cluster and the rules of one simulation.
type Options struct {
	// Machine is every node's topology; Nodes how many there are.
	Machine *topology.Topology
	Nodes   int
	Model   Model
	// Queue tunes the placer queue's back-off (the controller's defaults: DefaultQueueOptions).
	Queue queue.Options
	// SystemReservedCPUs are kept from pods on every node (the kubelet's --system-reserved=cpu):
	// a node's allocatable CPU is its online CPUs minus these. The static CPU manager takes them
	// from the lowest-numbered CPUs; the node agent keeps no reserved CPUs but at least one CPU
	// in its shared pool.
	SystemReservedCPUs int
	// SnapshotTTL is how long the placer reuses a snapshot (the controller's default:
	// DefaultSnapshotTTL); 0 rebuilds it after every change.
	SnapshotTTL time.Duration
	// Verify checks the deployer's invariants after every event (for finegrain: every
	// allocator's, that the allocators hold exactly the bound workers' CPUs, each on the NUMA
	// node the placer chose) and the simulation's own (no job running twice, none queued while
	// running); tests set it.
	Verify bool
}

// DefaultQueueOptions are the placer controller's default back-off settings.
func DefaultQueueOptions() queue.Options {
	return queue.Options{InitialBackoff: time.Second, MaxBackoff: time.Minute, ChangeDelay: 200 * time.Millisecond}
}

// DefaultSnapshotTTL is the placer controller's default snapshot reuse.
const DefaultSnapshotTTL = 100 * time.Millisecond

// maxEventsPerJob bounds a simulation that would otherwise not end (a bug, not a workload).
const maxEventsPerJob = 100_000

type runState int

const (
	queued runState = iota
	running
	done
	rejected
)

// run is one job's life in one simulation.
type run struct {
	job   *Job
	index int
	key   string
	state runState
	// start and end are simulated times.
	start, end time.Duration
	workers    []Placed
	// remaining is the base runtime left, in seconds; rate is how many base seconds pass per
	// simulated second; since is when remaining was last brought up to date.
	remaining float64
	rate      float64
	since     time.Duration
	version   uint64
	// first are the factors when the job started.
	first Factors
	// failedView is the deployer's view version at the last failed attempt (failed set).
	failed     bool
	failedView uint64
	timedOut   bool
	reason     string
	// refusals counts this job's plans that an allocator refused.
	refusals int
}

// deployer turns jobs into running workers on a strategy's cluster.
type deployer interface {
	// view brings what the placement code sees up to date for now (fresh: with every change,
	// whatever the snapshot's age) and returns its version: a job that failed on one version
	// fails again on it.
	view(now time.Duration, fresh bool) (uint64, error)
	// place tries job r on the current view.
	place(r *run) (attempt, error)
	release(r *run) error
	// unfit says why job r can never run under this strategy, or returns "".
	unfit(r *run) string
	// freeCPUs bounds the CPUs job r could get now (the placement code could not give more).
	freeCPUs(r *run) int
	verify() error
}

// attempt is the outcome of one try to place a job: its workers, or why it does not fit.
type attempt struct {
	workers []Placed
	reason  string
	// never marks a job that cannot fit even an empty cluster.
	never bool
	// refused marks a plan the placer accepted but a node's allocator refused to pin.
	refused bool
}

// simulation is one strategy's run over a trace.
type simulation struct {
	o        Options
	strategy Strategy
	dep      deployer
	numaCPUs []int
	q        *queue.Queue
	cal      calendar
	epoch    time.Time
	now      time.Duration
	runs     []run
	byKey    map[string]*run
	// active are the running jobs in start order.
	active    []*run
	wakeAt    time.Duration
	wakeSet   bool
	events    int
	attempts  int
	plans     int
	refusals  int
	rateDirty bool
}

// Simulate replays jobs under one strategy and returns every job's outcome, in the order of
// jobs (jobs arriving at the same instant are queued in that order, then ordered by the
// placer's queue).
func Simulate(jobs []Job, s Strategy, o Options) (*Result, error) {
	if o.Machine == nil || o.Nodes < 1 {
		return nil, fmt.Errorf("simulate %s: need a machine and at least one node", s.Name)
	}
	if o.SystemReservedCPUs < 0 || o.SystemReservedCPUs >= o.Machine.NumCPUs() {
		return nil, fmt.Errorf("simulate %s: %d system-reserved CPUs on a machine of %d; keep at least one for pods", s.Name, o.SystemReservedCPUs, o.Machine.NumCPUs())
	}
	if err := o.Model.Validate(); err != nil {
		return nil, fmt.Errorf("simulate %s: model: %w", s.Name, err)
	}
	sim := &simulation{o: o, strategy: s, q: queue.New(o.Queue), epoch: time.Unix(0, 0).UTC(),
		runs: make([]run, len(jobs)), byKey: make(map[string]*run, len(jobs))}
	for _, n := range o.Machine.NUMANodes {
		sim.numaCPUs = append(sim.numaCPUs, n.CPUs.Size())
	}
	switch s.Deployment {
	case Finegrain:
		f, err := newFinegrain(s, o.Machine, o.Nodes, o.SystemReservedCPUs, len(jobs), o.SnapshotTTL)
		if err != nil {
			return nil, fmt.Errorf("simulate %s: %w", s.Name, err)
		}
		sim.dep = f
	default:
		sim.dep = newKube(s, o.Machine, o.Nodes, o.SystemReservedCPUs, len(jobs))
	}
	for i := range jobs {
		r := &sim.runs[i]
		*r = run{job: &jobs[i], index: i, key: snapshot.HPCJobKey(Namespace, jobs[i].Name), remaining: jobs[i].Runtime.Seconds()}
		sim.byKey[r.key] = r
		sim.cal.add(event{at: jobs[i].Arrival, kind: evArrival, run: r})
	}
	if err := sim.loop(len(jobs)); err != nil {
		return nil, fmt.Errorf("simulate %s: %w", s.Name, err)
	}
	return sim.result(), nil
}

func (s *simulation) loop(jobs int) error {
	limit := maxEventsPerJob * max(jobs, 1)
	for {
		at, ok := s.cal.peek()
		if !ok {
			break
		}
		s.advance(at)
		for t, ok := s.cal.peek(); ok && t == at; t, ok = s.cal.peek() {
			if err := s.handle(s.cal.next()); err != nil {
				return err
			}
			if s.events++; s.events > limit {
				return fmt.Errorf("more than %d events for %d jobs at %v: the simulation does not converge", limit, jobs, at)
			}
		}
		if err := s.schedule(); err != nil {
			return err
		}
		if s.rateDirty {
			s.updateRates()
		}
		if s.o.Verify {
			if err := s.verify(); err != nil {
				return fmt.Errorf("at %v: %w", s.now, err)
			}
		}
	}
	for i := range s.runs {
		if r := &s.runs[i]; r.state != done && r.state != rejected {
			return fmt.Errorf("job %s was lost: still %v when no event was left", r.job.Name, r.state)
		}
	}
	return nil
}

// advance moves the clock to at, bringing every running job's progress up to date.
func (s *simulation) advance(at time.Duration) {
	for _, r := range s.active {
		r.remaining = max(0, r.remaining-(at-r.since).Seconds()*r.rate)
		r.since = at
	}
	s.now = at
}

func (s *simulation) handle(e event) error {
	r := e.run
	switch e.kind {
	case evArrival:
		timeout := time.Duration(r.job.Spec.Gang.TimeoutSeconds) * time.Second
		prio, _ := priority.Of(&r.job.Spec, traceClasses)
		s.q.Add(r.key, queue.Gang, prio, s.epoch.Add(r.job.Arrival), timeout)
	case evFinish:
		if r.state != running || e.version != r.version {
			return nil
		}
		if err := s.dep.release(r); err != nil {
			return err
		}
		r.state, r.end, r.remaining = done, s.now, 0
		s.active = slices.DeleteFunc(s.active, func(x *run) bool { return x == r })
		s.changed()
	case evWake:
		if s.wakeSet && s.wakeAt == e.at {
			s.wakeSet = false
		}
	}
	return nil
}

// changed records a change of the cluster, as the controller's informers do.
func (s *simulation) changed() {
	s.q.Changed()
	s.rateDirty = true
}

// schedule tries every ready gang, as the controller's loop does, then sets a wake-up for the
// next one that backs off.
func (s *simulation) schedule() error {
	t := s.epoch.Add(s.now)
	for {
		e, ok := s.q.Next(t)
		if !ok {
			break
		}
		r := s.byKey[e.Key]
		s.attempts++
		att, view, err := s.try(r)
		if err != nil {
			return err
		}
		if att.refused {
			s.refusals++
			r.refusals++
		}
		if att.workers == nil {
			if att.never || len(s.active) == 0 {
				s.q.Remove(r.key)
				r.state, r.reason, r.end = rejected, att.reason, s.now
				continue
			}
			s.fail(r, att.reason, view, t)
			continue
		}
		s.q.Remove(r.key)
		r.state, r.start, r.since, r.workers = running, s.now, s.now, att.workers
		s.active = append(s.active, r)
		s.changed()
	}
	w, ok := s.q.WakeAt()
	if !ok {
		return nil
	}
	at := w.Sub(s.epoch)
	if at <= s.now {
		return fmt.Errorf("the queue wakes at %v, not after now (%v), with no gang ready", at, s.now)
	}
	if !s.wakeSet || at < s.wakeAt {
		s.wakeAt, s.wakeSet = at, true
		s.cal.add(event{at: at, kind: evWake})
	}
	return nil
}

// try places a job, skipping the placement code — which could only fail again — when the job
// asks for more CPUs than the cluster could give it, or failed on the same view before. It
// returns the view it tried.
func (s *simulation) try(r *run) (attempt, uint64, error) {
	if reason := s.dep.unfit(r); reason != "" {
		return attempt{reason: reason, never: true}, 0, nil
	}
	if need, free := r.job.CPUs(), s.dep.freeCPUs(r); need > free {
		return attempt{reason: fmt.Sprintf("needs %d CPUs, the cluster has %d free", need, free)}, 0, nil
	}
	// An empty cluster is judged on a fresh view: failing there rejects the job.
	view, err := s.dep.view(s.now, len(s.active) == 0)
	if err != nil {
		return attempt{}, 0, err
	}
	if r.failed && r.failedView == view {
		return attempt{reason: r.reason}, view, nil
	}
	s.plans++
	att, err := s.dep.place(r)
	return att, view, err
}

func (s *simulation) fail(r *run, reason string, view uint64, t time.Time) {
	r.failed, r.failedView, r.reason = true, view, reason
	if s.q.Failed(r.key, t) {
		r.timedOut = true
	}
}

// updateRates recomputes every running job's slowdown and reschedules the finishes that moved.
func (s *simulation) updateRates() {
	s.rateDirty = false
	running := make([]Running, len(s.active))
	for i, r := range s.active {
		running[i] = Running{Profile: r.job.Spec.Profile, Workers: r.workers}
	}
	load := s.o.Model.NewLoad(s.numaCPUs, s.o.Nodes, running)
	for i, r := range s.active {
		f := s.o.Model.Slowdown(load, &running[i])
		rate := 1 / f.Total
		if r.start == s.now && r.rate == 0 {
			r.first = f
		}
		if rate == r.rate {
			continue
		}
		r.rate = rate
		r.version++
		left := time.Duration(math.Ceil(r.remaining / rate * float64(time.Second)))
		s.cal.add(event{at: s.now + left, kind: evFinish, run: r, version: r.version})
	}
}

func (s *simulation) verify() error {
	if err := s.dep.verify(); err != nil {
		return err
	}
	seen := map[*run]bool{}
	for _, r := range s.active {
		if seen[r] || r.state != running {
			return fmt.Errorf("job %s is listed as running twice or in state %v", r.job.Name, r.state)
		}
		seen[r] = true
	}
	for i := range s.runs {
		r := &s.runs[i]
		_, inQueue := s.q.Get(r.key)
		if inQueue && r.state != queued {
			return fmt.Errorf("job %s is queued while %v", r.job.Name, r.state)
		}
		if r.state == running && !seen[r] {
			return fmt.Errorf("job %s runs but is not active", r.job.Name)
		}
	}
	return nil
}

func (st runState) String() string {
	return [...]string{"queued", "running", "done", "rejected"}[st]
}
