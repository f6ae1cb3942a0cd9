package sim

import (
	"cmp"
	"container/heap"
	"time"
)

// eventKind orders events at the same instant: finishes free capacity before arrivals and wake
// ups look for it.
type eventKind int

const (
	evFinish eventKind = iota
	evArrival
	evWake
)

// event is one entry of the simulation's calendar.
type event struct {
	at   time.Duration
	kind eventKind
	// seq is the insertion number: it orders events of one kind at one instant, so the order
	// never depends on the heap's layout.
	seq uint64
	run *run
	// version is the run's version when a finish was scheduled; a later rate change makes it
	// stale.
	version uint64
}

type calendar struct {
	events []event
	seq    uint64
}

func (c *calendar) Len() int { return len(c.events) }
func (c *calendar) Less(i, j int) bool {
	a, b := &c.events[i], &c.events[j]
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.kind, b.kind), cmp.Compare(a.seq, b.seq)) < 0
}
func (c *calendar) Swap(i, j int) { c.events[i], c.events[j] = c.events[j], c.events[i] }
func (c *calendar) Push(x any)    { c.events = append(c.events, x.(event)) }
func (c *calendar) Pop() any {
	last := c.events[len(c.events)-1]
	c.events = c.events[:len(c.events)-1]
	return last
}

func (c *calendar) add(e event) {
	e.seq = c.seq
	c.seq++
	heap.Push(c, e)
}

func (c *calendar) next() event { return heap.Pop(c).(event) }

// peek returns the time of the next event; ok is false when the calendar is empty.
func (c *calendar) peek() (time.Duration, bool) {
	if len(c.events) == 0 {
		return 0, false
	}
	return c.events[0].at, true
}
