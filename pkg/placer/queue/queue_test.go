package queue

import (
	"slices"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newQueue() *Queue {
	return New(Options{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ChangeDelay: 100 * time.Millisecond})
}

func TestOrder(t *testing.T) {
	q := newQueue()
	q.Add("old-low", Gang, 0, t0, 0)
	q.Add("new-high", Gang, 10, t0.Add(time.Minute), 0)
	q.Add("old-high", Gang, 10, t0, 0)
	q.Add("grow-high", Expansion, 10, t0.Add(-time.Hour), 0)
	q.Add("b-tie", Gang, 0, t0, 0)
	want := []string{"old-high", "new-high", "grow-high", "b-tie", "old-low"}
	if got := q.Keys(); !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	q.Add("old-low", Gang, 20, t0, 0)
	if got := q.Keys()[0]; got != "old-low" {
		t.Errorf("after raising its priority, first is %s", got)
	}
	q.Remove("old-high")
	q.Remove("absent")
	if q.Len() != 4 {
		t.Errorf("len %d, want 4", q.Len())
	}
}

// A failed gang backs off and the next one is tried: no head-of-line blocking.
func TestBackoffMovesOn(t *testing.T) {
	q := newQueue()
	q.Add("big", Gang, 10, t0, 0)
	q.Add("small", Gang, 0, t0, 0)
	if e, _ := q.Next(t0); e.Key != "big" {
		t.Fatalf("first %s", e.Key)
	}
	q.Failed("big", t0)
	if e, _ := q.Next(t0); e.Key != "small" {
		t.Errorf("after big failed, next is %s, want small", e.Key)
	}
	q.Failed("small", t0)
	if _, ok := q.Next(t0.Add(500 * time.Millisecond)); ok {
		t.Error("a gang is ready during its back-off")
	}
	if w, ok := q.WakeAt(); !ok || !w.Equal(t0.Add(time.Second)) {
		t.Errorf("wake at %v, want t0+1s", w)
	}
	if e, _ := q.Next(t0.Add(time.Second)); e.Key != "big" {
		t.Errorf("after back-off, next is %s", e.Key)
	}
	// Back-off doubles up to the maximum.
	for i, want := range []time.Duration{2, 4, 8, 8} {
		now := t0.Add(time.Duration(i+1) * time.Hour)
		q.Failed("big", now)
		e, _ := q.Get("big")
		if got := e.notBefore.Sub(now); got != want*time.Second {
			t.Errorf("failure %d: back-off %v, want %vs", i+2, got, want)
		}
	}
}

// A gang put back after it was placed keeps the back-off of its earlier rounds.
func TestBackoffOfAGangPutBack(t *testing.T) {
	q := newQueue()
	q.Add("job", Gang, 0, t0, 0)
	q.Backoff("job", 3, t0)
	if e, _ := q.Get("job"); e.Attempts != 3 || !e.notBefore.Equal(t0.Add(4*time.Second)) {
		t.Errorf("after Backoff 3: attempts %d, ready at %v; want 3 and t0+4s", e.Attempts, e.notBefore)
	}
	if _, ok := q.Next(t0.Add(3 * time.Second)); ok {
		t.Error("ready during its back-off")
	}
	q.Failed("job", t0)
	if e, _ := q.Get("job"); e.Attempts != 4 || !e.notBefore.Equal(t0.Add(8*time.Second)) {
		t.Errorf("after one more failure: attempts %d, ready at %v; want 4 and t0+8s", e.Attempts, e.notBefore)
	}
	q.Backoff("job", 0, t0)
	if e, _ := q.Get("job"); e.Attempts != 1 || !e.notBefore.Equal(t0.Add(time.Second)) {
		t.Errorf("Backoff 0 counts as 1: attempts %d, ready at %v", e.Attempts, e.notBefore)
	}
	q.Backoff("absent", 2, t0)
}

// A cluster change makes failed gangs ready again after the change delay.
func TestChangeWakes(t *testing.T) {
	q := newQueue()
	q.Add("g", Gang, 0, t0, 0)
	q.Failed("g", t0)
	q.Changed()
	if _, ok := q.Next(t0.Add(50 * time.Millisecond)); ok {
		t.Error("ready before the change delay")
	}
	if w, _ := q.WakeAt(); !w.Equal(t0.Add(100 * time.Millisecond)) {
		t.Errorf("wake at %v, want t0+100ms", w)
	}
	if _, ok := q.Next(t0.Add(100 * time.Millisecond)); !ok {
		t.Error("not ready after a cluster change")
	}
	q.Failed("g", t0.Add(time.Second))
	if _, ok := q.Next(t0.Add(time.Second + 200*time.Millisecond)); ok {
		t.Error("ready again without a new change")
	}
}

func TestTimeoutReportedOnce(t *testing.T) {
	q := newQueue()
	q.Add("g", Gang, 0, t0, 30*time.Second)
	if q.Failed("g", t0.Add(10*time.Second)) {
		t.Error("timed out early")
	}
	if !q.Failed("g", t0.Add(31*time.Second)) {
		t.Error("not timed out after 31s")
	}
	if q.Failed("g", t0.Add(60*time.Second)) {
		t.Error("timeout reported twice")
	}
	if e, _ := q.Get("g"); !e.TimedOut || e.Attempts != 3 {
		t.Errorf("entry %+v", e)
	}
	if q.Failed("absent", t0) {
		t.Error("absent gang timed out")
	}
}

// With aging, a waiting gang's priority grows with its wait and orders Next; an expansion's does
// not age, and Keys keep the gangs' own order.
func TestAging(t *testing.T) {
	q := New(Options{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, Aging: elastic.Aging{PerHour: 10}})
	q.Add("old-low", Gang, 1, t0, 0)
	q.Add("new-high", Gang, 10, t0.Add(90*time.Minute), 0)
	q.Add("grow", Expansion, 12, t0.Add(-10*time.Hour), 0)
	at := func(d time.Duration) string {
		e, _ := q.Next(t0.Add(d))
		return e.Key
	}
	e, _ := q.Get("grow")
	if p := q.Priority(e, t0.Add(time.Hour)); p != 12 {
		t.Errorf("expansion aged to %d, want its own 12", p)
	}
	e, _ = q.Get("old-low")
	if p := q.Priority(e, t0.Add(90*time.Minute)); p != 16 {
		t.Errorf("gang of priority 1 after 90 minutes at 10 per hour: %d, want 16", p)
	}
	if got := at(90 * time.Minute); got != "old-low" {
		t.Errorf("after 90 minutes next is %s, want old-low (aged 16 over 10 and 12)", got)
	}
	if got := at(30 * time.Minute); got != "grow" {
		t.Errorf("after 30 minutes next is %s, want grow (12 over old-low's 6)", got)
	}
	q.Failed("old-low", t0.Add(90*time.Minute))
	if got := at(90 * time.Minute); got != "grow" {
		t.Errorf("with old-low backing off next is %s, want grow", got)
	}
	if got, want := q.Keys(), []string{"grow", "new-high", "old-low"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	off := newQueue()
	off.Add("old-low", Gang, 1, t0, 0)
	off.Add("new-high", Gang, 10, t0.Add(90*time.Minute), 0)
	if e, _ := off.Next(t0.Add(100 * time.Hour)); e.Key != "new-high" || off.Priority(e, t0.Add(100*time.Hour)) != 10 {
		t.Errorf("aging off: next %s", e.Key)
	}
}
