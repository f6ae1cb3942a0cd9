package sim

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
)

// ElasticOptions are one run of the elastic experiment.
type ElasticOptions struct {
	Model ElasticModel
	// Slots is the cluster's size: one slot per replica, one per running job's launcher.
	Slots int
	// RescaleGap is the least time between two rescales of one job (the elastic strategy).
	RescaleGap time.Duration
	// Aging, when on, raises waiting jobs' priorities with their wait (pkg/placer/elastic).
	Aging elastic.Aging
	// ShrinkLowerOnly lets an arriving job shrink only jobs of strictly lower priority, as
	// finegrain's placer does (its --shrink-scope); off, newJob also shrinks jobs of equal
	// priority, as the paper's does.
	ShrinkLowerOnly bool
}

// ElasticMetrics are the experiment's figures for one strategy, in seconds (utilisation 0–1).
type ElasticMetrics struct {
	// TotalTime runs from the first submission to the last job's end.
	TotalTime float64 `json:"totalTime"`
	// Utilization is the replica-slot time held by jobs over Slots × TotalTime.
	Utilization float64 `json:"utilization"`
	// WeightedMeanResponse is the mean submit → start time, each job weighted by its priority.
	WeightedMeanResponse float64 `json:"weightedMeanResponse"`
	// WeightedMeanCompletion is the mean submit → end time, each job weighted by its priority.
	WeightedMeanCompletion float64 `json:"weightedMeanCompletion"`
	// Makespan runs from the first job's start to the last job's end.
	Makespan float64 `json:"makespan"`
	// OverallResponse is the unweighted mean submit → start time.
	OverallResponse float64 `json:"overallResponse"`
}

// ElasticJobResult is what happened to one job.
type ElasticJobResult struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Priority int32   `json:"priority"`
	Submit   float64 `json:"submit"`
	Start    float64 `json:"start"`
	End      float64 `json:"end"`
	// Replicas it started with; Shrinks and Expands count its rescales.
	Replicas int `json:"replicas"`
	Shrinks  int `json:"shrinks"`
	Expands  int `json:"expands"`
}

// UsageStep is the cluster's replica slots in use from At on.
type UsageStep struct {
	At   float64 `json:"at"`
	Used int     `json:"used"`
}

// ElasticResult is one strategy's run.
type ElasticResult struct {
	Strategy ElasticStrategy    `json:"strategy"`
	Metrics  ElasticMetrics     `json:"metrics"`
	Jobs     []ElasticJobResult `json:"jobs"`
	Usage    []UsageStep        `json:"usage"`
}

// ejob is a job during a run.
type ejob struct {
	spec *ElasticJob
	typ  *ElasticType
	pj   elastic.Job
	// idx is the job's place in the run's jobs, rank its place in elastic.Before's order at
	// base priority.
	idx, rank int
	// steps is the timesteps left at last; the job progresses from max(last, stall) on.
	steps, last, stall float64
	start, end         float64
	running, done      bool
	// gen tells a job's current end event from ones its rescales made stale.
	gen              int
	startWith        int
	shrinks, expands int
}

// eevent is an end (job ≥ 0) or a wake-up at a rescale gap's end (job −1).
type eevent struct {
	at       float64
	job, gen int
	seq      int
}

type eventHeap []eevent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(eevent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// elasticEpoch is the simulation's time 0 as the policy's clock reads it.
var elasticEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func epochAt(s float64) time.Time { return elasticEpoch.Add(time.Duration(math.Round(s * 1e9))) }

// elasticRun is the state of one run.
type elasticRun struct {
	o        *ElasticOptions
	strategy ElasticStrategy
	jobs     []*ejob
	waiting  []*ejob
	running  []*ejob
	free     int
	used     int
	now      float64
	events   eventHeap
	seq      int
	wakeAt   float64
	usage    []UsageStep
	held     float64
	byKey    map[string]*ejob
	// slack, slackDirty, minWaiting and quota serve the quick tests of arrive and complete.
	quota      map[int]int
	slack      []slackStep
	slackDirty bool
	minWaiting int
}

// SimulateElastic runs jobs (ordered by arrival) under one strategy, as the elastic scheduler
// does: at every instant jobs end and rescale gaps end, and when either freed anything
// elastic.CompleteJob hands the free slots to running and waiting jobs in priority order; then
// each arriving job asks elastic.NewJob — over the running jobs elastic.Victims lets it shrink,
// and the slot fit elastic.Slots — and starts, or waits for a completeJob. Rigid and moldable
// jobs take the same path and are never rescaled.
func SimulateElastic(jobs []ElasticJob, strategy ElasticStrategy, o ElasticOptions) (*ElasticResult, error) {
	if err := o.Model.Validate(); err != nil {
		return nil, err
	}
	if o.Slots < 2 {
		return nil, fmt.Errorf("elastic: %d slots; want at least 2 (a replica and its launcher)", o.Slots)
	}
	if o.RescaleGap < 0 {
		return nil, fmt.Errorf("elastic: rescale gap %v; want 0 or more", o.RescaleGap)
	}
	r := &elasticRun{o: &o, strategy: strategy, free: o.Slots, wakeAt: -1, byKey: map[string]*ejob{}, quota: map[int]int{}, minWaiting: math.MaxInt}
	for i := range jobs {
		j := &jobs[i]
		if i > 0 && j.Arrival < jobs[i-1].Arrival {
			return nil, fmt.Errorf("elastic: job %s arrives before the job listed before it; order jobs by arrival", j.Name)
		}
		typ, err := o.Model.Type(j.Type)
		if err != nil {
			return nil, fmt.Errorf("elastic: job %s: %w", j.Name, err)
		}
		lo, hi, err := strategy.bounds(j, o.Slots)
		if err != nil {
			return nil, err
		}
		if _, dup := r.byKey[j.Name]; dup {
			return nil, fmt.Errorf("elastic: two jobs named %s; give every job its own name", j.Name)
		}
		sub := epochAt(j.Arrival.Seconds())
		r.jobs = append(r.jobs, &ejob{spec: j, typ: typ, idx: i, steps: float64(j.Timesteps), pj: elastic.Job{
			Key: j.Name, Priority: j.Priority, Submitted: sub, Min: lo, Max: hi,
			Rescalable: strategy == Elastic, Gap: o.RescaleGap,
		}})
		r.byKey[j.Name] = r.jobs[i]
	}
	byPolicy := slices.Clone(r.jobs)
	slices.SortFunc(byPolicy, func(a, b *ejob) int { return elastic.Before(a.pj, b.pj) })
	for i, j := range byPolicy {
		j.rank = i
	}
	next := 0
	for {
		at := math.Inf(1)
		if next < len(r.jobs) {
			at = r.jobs[next].spec.Arrival.Seconds()
		}
		if len(r.events) > 0 && r.events[0].at < at {
			at = r.events[0].at
		}
		if math.IsInf(at, 1) {
			break
		}
		r.account(at)
		now := epochAt(at)
		// Rescale gaps end with time: what jobs may give up is recomputed at each instant.
		r.slackDirty = true
		freed := false
		for len(r.events) > 0 && r.events[0].at <= at {
			ev := heap.Pop(&r.events).(eevent)
			if ev.job < 0 {
				r.wakeAt, freed = -1, true
				continue
			}
			if j := r.jobs[ev.job]; j.gen == ev.gen && j.running {
				r.finish(j)
				freed = true
			}
		}
		if freed {
			r.complete(now)
		}
		for next < len(r.jobs) && r.jobs[next].spec.Arrival.Seconds() <= at {
			r.arrive(r.jobs[next], now)
			next++
		}
		r.wake()
	}
	for _, j := range r.jobs {
		if !j.done {
			return nil, fmt.Errorf("elastic: job %s (%d to %d replicas) never ran on %d slots; its minimum and its launcher must fit the cluster", j.spec.Name, j.pj.Min, j.pj.Max, o.Slots)
		}
	}
	return r.result(), nil
}

// before is elastic.Before over the run's jobs: their ranks, computed once, unless aging moves
// waiting jobs' priorities.
func (r *elasticRun) before(a, b *ejob) int {
	if r.o.Aging.PerHour > 0 {
		return elastic.Before(a.pj, b.pj)
	}
	return cmp.Compare(a.rank, b.rank)
}

// bounds gives a job its replica bounds under the strategy; no job may ask more than the
// cluster's slots less its launcher's.
func (s ElasticStrategy) bounds(j *ElasticJob, slots int) (int, int, error) {
	hi := min(j.Max, slots-1)
	if j.Min > hi {
		return 0, 0, fmt.Errorf("elastic: job %s needs %d replicas and a launcher; the cluster has %d slots", j.Name, j.Min, slots)
	}
	switch s {
	case RigidMin:
		return j.Min, j.Min, nil
	case RigidMax:
		return hi, hi, nil
	case Moldable, Elastic:
		return j.Min, hi, nil
	}
	return 0, 0, fmt.Errorf("unknown elastic strategy %q; want one of %v", s, ElasticStrategies)
}

// account adds the slot time held since the last instant and moves the clock to at.
func (r *elasticRun) account(at float64) {
	r.held += float64(r.used) * (at - r.now)
	r.now = at
}

// setUsed records the replica slots in use from now on.
func (r *elasticRun) setUsed(used int) {
	r.used = used
	if n := len(r.usage); n > 0 && r.usage[n-1].At == r.now {
		r.usage[n-1].Used = used
		return
	}
	r.usage = append(r.usage, UsageStep{At: r.now, Used: used})
}

// progress brings a running job's timesteps left up to now.
func (r *elasticRun) progress(j *ejob) {
	from := max(j.last, j.stall)
	if r.now > from {
		j.steps = max(0, j.steps-(r.now-from)/j.typ.StepTime(j.pj.Workers))
	}
	j.last = r.now
}

// plan schedules a running job's end from its size now.
func (r *elasticRun) plan(j *ejob) {
	j.gen++
	end := max(r.now, j.stall) + j.steps*j.typ.StepTime(j.pj.Workers)
	r.push(eevent{at: end, job: j.idx, gen: j.gen})
}

func (r *elasticRun) push(ev eevent) {
	ev.seq = r.seq
	r.seq++
	heap.Push(&r.events, ev)
}

func (r *elasticRun) finish(j *ejob) {
	j.running, j.done, j.end = false, true, r.now
	r.free += j.pj.Workers + 1
	r.setUsed(r.used - j.pj.Workers)
	r.running = slices.DeleteFunc(r.running, func(x *ejob) bool { return x == j })
	r.slackDirty = true
}

// resize changes a running job's replicas at now: it stalls for the rescale's checkpoint,
// restart and load balancing.
func (r *elasticRun) resize(j *ejob, to int) {
	r.progress(j)
	from := j.pj.Workers
	j.stall = max(r.now, j.stall) + r.o.Model.Rescale(j.typ, from)
	j.pj.Workers, j.pj.LastRescale = to, epochAt(r.now)
	r.free += from - to
	r.setUsed(r.used - from + to)
	r.slackDirty = true
	if to < from {
		j.shrinks++
	} else {
		j.expands++
	}
	r.plan(j)
}

// arrive is newJob for a job that arrives: it starts, after the shrinks the policy chose, or
// it waits. The policy is asked only when the job can start: when its minimum fits the free
// slots and what the jobs it may shrink hold above their minimums, newJob's own second test.
// With ShrinkLowerOnly the jobs of its own priority or higher are left out of the candidates,
// as the placer's shrink scope leaves them out before elastic.Victims.
func (r *elasticRun) arrive(j *ejob, now time.Time) {
	if j.pj.Min > r.free-1+r.slackFor(j.pj.Priority, now) {
		r.wait(j)
		return
	}
	var victims []elastic.Job
	if r.strategy == Elastic {
		cands := make([]elastic.Job, 0, len(r.running))
		for _, x := range r.running {
			if r.o.ShrinkLowerOnly && x.pj.Priority >= j.pj.Priority {
				continue
			}
			cands = append(cands, x.pj)
		}
		victims = elastic.Victims(j.pj, cands, now)
	}
	st := elastic.NewJob(j.pj, victims, elastic.Slots(r.free))
	if st.Workers == 0 {
		panic(fmt.Sprintf("elastic: newJob does not start %s although its minimum fits", j.spec.Name))
	}
	begin := r.now
	for _, s := range st.Shrinks {
		v := r.byKey[s.Key]
		if !v.running || v.pj.Workers != s.From {
			panic(fmt.Sprintf("elastic: newJob shrinks %s from %d, it has %d", s.Key, s.From, v.pj.Workers))
		}
		begin = max(begin, max(r.now, v.stall)+r.o.Model.Checkpoint(s.From))
		r.resize(v, s.To)
	}
	r.start(j, st.Workers, begin)
}

// wait queues a job that cannot start.
func (r *elasticRun) wait(j *ejob) {
	at, _ := slices.BinarySearchFunc(r.waiting, j, r.before)
	r.waiting = slices.Insert(r.waiting, at, j)
	r.minWaiting = min(r.minWaiting, j.pj.Min)
}

// start runs a job with workers replicas from begin; it progresses once its replicas have
// connected (the model's StartDelay).
func (r *elasticRun) start(j *ejob, workers int, begin float64) {
	if i := slices.Index(r.waiting, j); i >= 0 {
		r.waiting = slices.Delete(r.waiting, i, i+1)
		r.minWaiting = math.MaxInt
		for _, w := range r.waiting {
			r.minWaiting = min(r.minWaiting, w.pj.Min)
		}
	}
	j.pj.Priority = j.spec.Priority
	j.running, j.start, j.last, j.stall, j.startWith = true, begin, r.now, begin+r.o.Model.StartDelay(workers), workers
	j.pj.Workers, j.pj.LastRescale = workers, epochAt(begin)
	r.free -= workers + 1
	if r.free < 0 {
		panic(fmt.Sprintf("elastic: starting %s with %d replicas leaves %d slots", j.spec.Name, workers, r.free))
	}
	r.setUsed(r.used + workers)
	r.running = append(r.running, j)
	r.slackDirty = true
	r.plan(j)
}

// complete is completeJob, run when a job ends or a rescale gap that held a job back ends:
// elastic.CompleteJob hands the free slots (elastic.SlotRoom) to running and waiting jobs in
// priority order. It is given only the jobs that could take any: running jobs that may grow
// (rescalable, below their maximum, out of their gap) and waiting jobs whose minimum fits the
// free slots.
func (r *elasticRun) complete(now time.Time) {
	if r.free <= 0 {
		return
	}
	var cands []elastic.Job
	for _, x := range r.running {
		if x.pj.Rescalable && x.pj.Workers < x.pj.Max && x.pj.Due(now) {
			cands = append(cands, x.pj)
		}
	}
	if r.minWaiting <= r.free-1 {
		if r.o.Aging.PerHour > 0 {
			for _, w := range r.waiting {
				w.pj.Priority = r.o.Aging.Priority(w.spec.Priority, now.Sub(w.pj.Submitted))
			}
			slices.SortStableFunc(r.waiting, r.before)
		}
		// Of the waiting jobs of one minimum m, in priority order, those that start are the
		// first ones (room only shrinks, so once one does not fit, none after it does), at most
		// free/(m+1) of them: the others need not be asked.
		clear(r.quota)
		for _, w := range r.waiting {
			m := w.pj.Min
			if m > r.free-1 || r.quota[m] >= r.free/(m+1) {
				continue
			}
			r.quota[m]++
			cands = append(cands, w.pj)
		}
	}
	if len(cands) == 0 {
		return
	}
	for _, g := range elastic.CompleteJob(cands, now, &elastic.SlotRoom{Free: r.free}) {
		j := r.byKey[g.Key]
		if g.From == 0 {
			r.start(j, g.To, r.now)
		} else {
			r.resize(j, g.To)
		}
	}
}

// slackStep is what the running jobs newJob may shrink for a job of priority up to prio hold
// above their minimums.
type slackStep struct {
	prio int32
	sum  int
}

// slackFor returns what the running jobs elastic.Victims would offer a job of priority p
// hold above their minimums: rescalable, above their minimum, out of their rescale gap, of
// priority at most p (below p with ShrinkLowerOnly).
func (r *elasticRun) slackFor(p int32, now time.Time) int {
	if r.strategy != Elastic {
		return 0
	}
	if r.o.ShrinkLowerOnly {
		p--
	}
	if r.slackDirty {
		r.slack = r.slack[:0]
		for _, x := range r.running {
			if x.pj.Rescalable && x.pj.Workers > x.pj.Min && x.pj.Due(now) {
				r.slack = append(r.slack, slackStep{x.pj.Priority, x.pj.Workers - x.pj.Min})
			}
		}
		slices.SortFunc(r.slack, func(a, b slackStep) int { return cmp.Compare(a.prio, b.prio) })
		for i := 1; i < len(r.slack); i++ {
			r.slack[i].sum += r.slack[i-1].sum
		}
		r.slackDirty = false
	}
	i, _ := slices.BinarySearchFunc(r.slack, p+1, func(s slackStep, t int32) int { return cmp.Compare(s.prio, t) })
	if i == 0 {
		return 0
	}
	return r.slack[i-1].sum
}

// wake sets a wake-up at the earliest end of a rescale gap that holds back a running job that
// could grow into free slots.
func (r *elasticRun) wake() {
	if r.strategy != Elastic || r.free == 0 {
		return
	}
	at := math.Inf(1)
	for _, j := range r.running {
		// A microsecond late, so that the policy's clock sees the gap over.
		due := j.pj.LastRescale.Sub(elasticEpoch).Seconds() + r.o.RescaleGap.Seconds() + 1e-6
		if due > r.now && j.pj.Workers < j.pj.Max {
			at = math.Min(at, due)
		}
	}
	if math.IsInf(at, 1) || (r.wakeAt >= 0 && r.wakeAt <= at) {
		return
	}
	r.wakeAt = at
	r.push(eevent{at: at, job: -1})
}

// result sums a finished run up.
func (r *elasticRun) result() *ElasticResult {
	res := &ElasticResult{Strategy: r.strategy, Usage: r.usage}
	first, firstStart, last := math.Inf(1), math.Inf(1), 0.0
	var wsum, wresp, wcomp, resp float64
	for _, j := range r.jobs {
		sub := j.spec.Arrival.Seconds()
		first, firstStart, last = math.Min(first, sub), math.Min(firstStart, j.start), math.Max(last, j.end)
		w := float64(j.spec.Priority)
		wsum += w
		wresp += w * (j.start - sub)
		wcomp += w * (j.end - sub)
		resp += j.start - sub
		res.Jobs = append(res.Jobs, ElasticJobResult{Name: j.spec.Name, Type: j.spec.Type, Priority: j.spec.Priority,
			Submit: sub, Start: j.start, End: j.end, Replicas: j.startWith, Shrinks: j.shrinks, Expands: j.expands})
	}
	m := &res.Metrics
	m.TotalTime, m.Makespan = last-first, last-firstStart
	if m.TotalTime > 0 {
		m.Utilization = r.held / (float64(r.o.Slots) * m.TotalTime)
	}
	m.WeightedMeanResponse, m.WeightedMeanCompletion = wresp/wsum, wcomp/wsum
	m.OverallResponse = resp / float64(len(r.jobs))
	return res
}
