// Package queue owns the placer's gang queue: which gang is tried next. Gangs are ordered by
// priority (higher first; with aging on, a waiting gang's priority grows with its wait), then by
// kind (new gangs before the expansion of a running elastic job), then by age (older first), then
// by key, so that every pod of one gang is placed back to back and a gang that does not fit never
// blocks the ones behind it: a failed gang backs off exponentially, and comes back early once the
// cluster has changed since it failed. The queue only orders keys; it must not plan, bind or read
// the cluster. It is not safe for concurrent use: the placer's scheduling loop owns it.
package queue

import (
	"cmp"
	"slices"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
)

// Kind separates new gangs from expansions of running elastic jobs.
type Kind int

const (
	// Gang is a job or pod group waiting to be placed.
	Gang Kind = iota
	// Expansion is a running elastic job that could grow.
	Expansion
)

// Entry is one queued gang.
type Entry struct {
	Key  string
	Kind Kind
	// Priority is the gang's own priority, without aging (Queue.Priority ages it).
	Priority int32
	// Created is when the gang was submitted; it orders equal priorities and starts its timeout.
	Created time.Time
	// Timeout is how long the gang may wait before it is reported as timed out (0: never).
	Timeout time.Duration

	// Attempts counts failed attempts since the gang was queued.
	Attempts int
	// TimedOut is set once the gang has waited longer than Timeout.
	TimedOut bool

	notBefore   time.Time
	lastAttempt time.Time
	failedGen   uint64
}

// Options tune back-off.
type Options struct {
	// InitialBackoff is the wait after the first failure; it doubles per failure up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// ChangeDelay is the least wait after a failure before a cluster change makes the gang ready
	// again (it batches bursts of events).
	ChangeDelay time.Duration
	// Aging raises the priority of a waiting gang (Kind Gang, not an expansion) by the time since
	// its Created, for the order alone; the zero value is off.
	Aging elastic.Aging
}

// Queue is the ordered set of gangs.
type Queue struct {
	opts    Options
	entries []*Entry
	byKey   map[string]*Entry
	gen     uint64
}

// New makes an empty queue.
func New(opts Options) *Queue {
	return &Queue{opts: opts, byKey: map[string]*Entry{}}
}

func less(a, b *Entry) int { return order(a.Priority, b.Priority, a, b) }

// order compares a and b as the queue orders them when their priorities are pa and pb.
func order(pa, pb int32, a, b *Entry) int {
	return cmp.Or(
		cmp.Compare(pb, pa),
		cmp.Compare(a.Kind, b.Kind),
		a.Created.Compare(b.Created),
		cmp.Compare(a.Key, b.Key),
	)
}

// Add queues a gang, or updates the priority, creation time and timeout of a queued one (its
// back-off state is kept).
func (q *Queue) Add(key string, kind Kind, priority int32, created time.Time, timeout time.Duration) {
	if e, ok := q.byKey[key]; ok {
		if e.Priority == priority && e.Created.Equal(created) && e.Timeout == timeout && e.Kind == kind {
			return
		}
		q.remove(key)
		e.Kind, e.Priority, e.Created, e.Timeout = kind, priority, created, timeout
		q.insert(e)
		return
	}
	q.insert(&Entry{Key: key, Kind: kind, Priority: priority, Created: created, Timeout: timeout})
}

func (q *Queue) insert(e *Entry) {
	i, _ := slices.BinarySearchFunc(q.entries, e, less)
	q.entries = slices.Insert(q.entries, i, e)
	q.byKey[e.Key] = e
}

// Remove drops a gang (placed, deleted, or no longer pending).
func (q *Queue) Remove(key string) { q.remove(key) }

func (q *Queue) remove(key string) {
	e, ok := q.byKey[key]
	if !ok {
		return
	}
	delete(q.byKey, key)
	i, found := slices.BinarySearchFunc(q.entries, e, less)
	if found && q.entries[i] == e {
		q.entries = slices.Delete(q.entries, i, i+1)
		return
	}
	q.entries = slices.DeleteFunc(q.entries, func(x *Entry) bool { return x == e })
}

// Get returns a queued gang.
func (q *Queue) Get(key string) (*Entry, bool) {
	e, ok := q.byKey[key]
	return e, ok
}

// Len is the number of queued gangs.
func (q *Queue) Len() int { return len(q.entries) }

// Changed records that the cluster changed (capacity may have been freed or added).
func (q *Queue) Changed() { q.gen++ }

func (q *Queue) ready(e *Entry, now time.Time) bool {
	if e.Attempts == 0 || !now.Before(e.notBefore) {
		return true
	}
	return q.gen > e.failedGen && !now.Before(e.lastAttempt.Add(q.opts.ChangeDelay))
}

// Priority is e's priority at now: a waiting gang's aged by Options.Aging, an expansion's its own.
func (q *Queue) Priority(e *Entry, now time.Time) int32 {
	if e.Kind != Gang {
		return e.Priority
	}
	return q.opts.Aging.Priority(e.Priority, now.Sub(e.Created))
}

// Next returns the first gang, in queue order at now, that is ready to be tried at now. The
// entries are kept in the order of their own priorities; with aging on, the ready gang that
// comes first by its priority at now is found by a scan of them all.
func (q *Queue) Next(now time.Time) (*Entry, bool) {
	aging := q.opts.Aging.PerHour > 0
	var first *Entry
	for _, e := range q.entries {
		if !q.ready(e, now) {
			continue
		}
		if !aging {
			return e, true
		}
		if first == nil || q.lessAt(e, first, now) < 0 {
			first = e
		}
	}
	return first, first != nil
}

// lessAt is less with the entries' priorities at now.
func (q *Queue) lessAt(a, b *Entry, now time.Time) int {
	return order(q.Priority(a, now), q.Priority(b, now), a, b)
}

// Failed records a failed attempt at now: the gang backs off, and reports whether it has just
// passed its timeout (true once per gang).
func (q *Queue) Failed(key string, now time.Time) (timedOut bool) {
	e, ok := q.byKey[key]
	if !ok {
		return false
	}
	q.backoff(e, e.Attempts+1, now)
	if e.Timeout > 0 && !e.TimedOut && now.Sub(e.Created) >= e.Timeout {
		e.TimedOut = true
		return true
	}
	return false
}

// Backoff makes a queued gang wait as after its attempts-th failed attempt at now, whatever it
// failed before: a gang put back after it was placed keeps the back-off of its earlier rounds.
// Attempts below 1 count as 1.
func (q *Queue) Backoff(key string, attempts int, now time.Time) {
	if e, ok := q.byKey[key]; ok {
		q.backoff(e, max(attempts, 1), now)
	}
}

// backoff records attempt number attempts of e as failed at now.
func (q *Queue) backoff(e *Entry, attempts int, now time.Time) {
	e.Attempts = attempts
	wait := q.opts.InitialBackoff << min(attempts-1, 30)
	if wait <= 0 || wait > q.opts.MaxBackoff {
		wait = q.opts.MaxBackoff
	}
	e.notBefore = now.Add(wait)
	e.lastAttempt = now
	e.failedGen = q.gen
}

// WakeAt is the earliest time a queued gang becomes ready (ok is false when nothing is queued).
func (q *Queue) WakeAt() (t time.Time, ok bool) {
	for _, e := range q.entries {
		w := e.notBefore
		if e.Attempts > 0 && q.gen > e.failedGen {
			w = e.lastAttempt.Add(q.opts.ChangeDelay)
		}
		if !ok || w.Before(t) {
			t, ok = w, true
		}
	}
	return t, ok
}

// Keys lists the queued gangs in the order of their own priorities (without aging).
func (q *Queue) Keys() []string {
	out := make([]string, len(q.entries))
	for i, e := range q.entries {
		out[i] = e.Key
	}
	return out
}
