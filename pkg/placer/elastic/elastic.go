// Package elastic owns the placer's elastic policy, the elastic Charm++ scheduler's two rules:
// newJob (which running jobs a job that does not fit shrinks, by how much, and with how many
// workers it starts) and completeJob (who takes capacity that frees up: running jobs grow and
// waiting jobs start in priority order, each up to its maximum, a waiting job only when it
// reaches its minimum). It also owns the optional aging of waiting jobs' priorities. The
// controller and the simulator call it alike. It decides over plain values and a fit oracle the
// caller supplies (the placer's planner on a snapshot, or a count of free slots); it must not
// plan pods, call the API server or read the clock.
//
// Rigid jobs (minimum = maximum) and moldable ones (a size chosen when they start, never changed)
// take the same path as elastic ones: they are simply never Rescalable, so they start through
// NewJob and are never shrunk or grown.
package elastic

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Job is a job as the policy sees it: a waiting one (Workers 0) or a running one.
type Job struct {
	Key      string
	Priority int32
	// Submitted orders jobs of equal priority: the earlier one is served first and shrunk last.
	Submitted time.Time
	// Min and Max bound the job's workers; Workers is what a running job has now.
	Min, Max, Workers int
	// Rescalable says the running job can be told of a new size (it has a rescale hook), so it
	// may be shrunk and grown. A job that is not keeps the size it started with.
	Rescalable bool
	// LastRescale is when the job last changed size (when it started, if it never has); Gap is
	// the least time between two of its rescales.
	LastRescale time.Time
	Gap         time.Duration
}

// Due reports whether the job's rescale gap has passed at now.
func (j *Job) Due(now time.Time) bool { return !now.Before(j.LastRescale.Add(j.Gap)) }

// Shrink is a running job giving up workers: from From workers to To.
type Shrink struct {
	Key      string
	From, To int
}

// Start is newJob's decision for a job that arrives or waits.
type Start struct {
	// Workers is the size the job starts with once the shrinks are done; 0 when it cannot start
	// even with every job it may shrink at its minimum (it waits, and nothing is shrunk).
	Workers int
	// Shrinks are the jobs to shrink first, in the order newJob took from them.
	Shrinks []Shrink
}

// Fit reports whether the new job fits with workers workers once every victim i has given up
// take[i] of its workers (victims as Victims ordered them). More workers taken never makes a
// fit fail, and fewer workers never need more room.
type Fit func(workers int, take []int) bool

// Victims returns the running jobs a job j may shrink, in the order newJob takes from them: jobs
// that are rescalable, above their minimum and out of their rescale gap, walking from the lowest
// priority (among equal priorities the latest submitted first) and stopping at the first job of
// strictly higher priority than j's — a job of equal priority may be shrunk. The caller leaves
// out beforehand the jobs j may not touch at all: the placer's shrink scope (priority.Scope) is
// stricter, only jobs of strictly lower priority, so there equal priorities never shrink.
func Victims(j Job, running []Job, now time.Time) []Job {
	var out []Job
	for _, r := range running {
		if r.Rescalable && r.Workers > r.Min && r.Priority <= j.Priority && r.Due(now) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Job) int { return Before(b, a) })
	return out
}

// NewJob is the elastic scheduler's newJob for job j over the victims Victims chose:
//  1. when j fits at its maximum already, it starts so and nothing is shrunk;
//  2. when j does not fit even at its minimum with every victim at its own minimum, nothing is
//     shrunk and j waits;
//  3. otherwise victims give up workers in order, each the fewest that let j reach its maximum,
//     or all it has above its minimum and the walk goes on, until j fits at its maximum or the
//     victims run out;
//  4. j starts with the most workers in [Min, Max] that fit then — on a cluster of slots with a
//     launcher taking one, min(free − 1, Max) (Slots).
func NewJob(j Job, victims []Job, fit Fit) Start {
	take := make([]int, len(victims))
	if fit(j.Max, take) {
		return Start{Workers: j.Max}
	}
	all := make([]int, len(victims))
	for i, v := range victims {
		all[i] = v.Workers - v.Min
	}
	if !fit(j.Min, all) {
		return Start{}
	}
	for i := range victims {
		take[i] = all[i]
		if !fit(j.Max, take) {
			continue
		}
		// The fewest of this victim's workers that let j reach its maximum.
		fewest := least(1, all[i], func(s int) bool {
			take[i] = s
			return fit(j.Max, take)
		})
		take[i] = fewest
		break
	}
	out := Start{Workers: Most(j.Min, j.Max, func(k int) bool { return fit(k, take) })}
	for i, v := range victims {
		if take[i] > 0 {
			out.Shrinks = append(out.Shrinks, Shrink{Key: v.Key, From: v.Workers, To: v.Workers - take[i]})
		}
	}
	return out
}

// least returns the smallest s in [lo, hi] for which ok holds, given that ok(hi) holds and ok is
// monotone.
func least(lo, hi int, ok func(int) bool) int {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// Most returns the largest k in [lo, hi] for which fit holds (fit monotone: fewer workers never
// need more room), or 0 when fit(lo) does not hold.
func Most(lo, hi int, fit func(k int) bool) int {
	if lo > hi || !fit(lo) {
		return 0
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fit(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Before orders jobs for completeJob: higher priority first, then the earlier submitted, then by
// key. Its reverse is the order in which newJob shrinks.
func Before(a, b Job) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Submitted.Compare(b.Submitted), cmp.Compare(a.Key, b.Key))
}

// MayGrow is completeJob's rule for a running job j that could grow into free capacity: it must
// be rescalable, below its maximum and out of its rescale gap, and no waiting job served before
// it (Before) may start now — startsNow reports whether a waiting job fits at its minimum. A
// waiting job that does not fit, however high its priority, does not hold j back.
func MayGrow(j Job, waiting []Job, now time.Time, startsNow func(Job) bool) bool {
	if !j.Rescalable || j.Workers >= j.Max || !j.Due(now) {
		return false
	}
	for _, w := range waiting {
		if Before(w, j) < 0 && startsNow(w) {
			return false
		}
	}
	return true
}

// Grant is one of completeJob's decisions: job Key goes from From workers to To (From 0: a
// waiting job starts).
type Grant struct {
	Key      string
	From, To int
}

// Room is the capacity completeJob hands out: Fits reports whether job j could have workers
// workers now (fewer never need more room), and Take records a grant made.
type Room interface {
	Fits(j Job, workers int) bool
	Take(g Grant)
}

// CompleteJob is the elastic scheduler's completeJob, run when capacity frees up: running and
// waiting jobs, in priority order (Before), each take what room lets them up to their maximum —
// a waiting job only when it reaches its minimum, a running one only when MayGrow's own
// conditions hold (rescalable, below its maximum, out of its rescale gap). A waiting job that
// does not fit is passed over: it does not hold back those after it.
func CompleteJob(jobs []Job, now time.Time, room Room) []Grant {
	order := slices.Clone(jobs)
	slices.SortStableFunc(order, Before)
	var out []Grant
	for _, j := range order {
		lo := j.Min
		if j.Workers > 0 {
			if !j.Rescalable || j.Workers >= j.Max || !j.Due(now) {
				continue
			}
			lo = j.Workers + 1
		}
		k := Most(lo, j.Max, func(k int) bool { return room.Fits(j, k) })
		if k == 0 {
			continue
		}
		g := Grant{Key: j.Key, From: j.Workers, To: k}
		room.Take(g)
		out = append(out, g)
	}
	return out
}

// SlotRoom is Room on the elastic scheduler's own cluster model: Free slots, a worker taking one
// and a starting job's launcher one more.
type SlotRoom struct{ Free int }

// Fits implements Room.
func (r *SlotRoom) Fits(j Job, workers int) bool {
	if j.Workers == 0 {
		return workers <= r.Free-1
	}
	return workers-j.Workers <= r.Free
}

// Take implements Room.
func (r *SlotRoom) Take(g Grant) {
	r.Free -= g.To - g.From
	if g.From == 0 {
		r.Free--
	}
}

// Slots is the fit of the elastic scheduler's own cluster model: free slots, each worker taking
// one and the launcher one more, and each worker a victim gives up freeing one.
func Slots(free int) Fit {
	return func(workers int, take []int) bool {
		n := free
		for _, t := range take {
			n += t
		}
		return workers <= n-1
	}
}

// Aging raises the priority of a waiting job with the time it has waited, so that a stream of
// higher-priority jobs cannot starve it for ever. The zero value is off: the elastic scheduler's
// paper orders by priority alone.
type Aging struct {
	// PerHour is the priority a job gains per hour of waiting.
	PerHour float64
}

// Priority returns the priority of a job of base priority that has waited for waited.
func (a Aging) Priority(base int32, waited time.Duration) int32 {
	if a.PerHour <= 0 || waited <= 0 {
		return base
	}
	p := float64(base) + math.Floor(a.PerHour*waited.Hours())
	return int32(min(p, math.MaxInt32))
}
