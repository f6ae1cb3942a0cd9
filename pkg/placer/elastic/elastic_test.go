package elastic

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// running is a running rescalable job submitted at minute sub, last rescaled long ago.
func running(key string, prio int32, sub, min, max, workers int) Job {
	return Job{Key: key, Priority: prio, Submitted: t0.Add(time.Duration(sub) * time.Minute), Min: min, Max: max, Workers: workers,
		Rescalable: true, LastRescale: t0, Gap: time.Minute}
}

func arriving(prio int32, min, max int) Job {
	return Job{Key: "new", Priority: prio, Submitted: t0.Add(time.Hour), Min: min, Max: max}
}

var now = t0.Add(2 * time.Hour)

// decide runs newJob on a slot cluster with free slots, as the elastic scheduler's pseudocode
// does.
func decide(j Job, free int, run []Job) Start {
	return NewJob(j, Victims(j, run, now), Slots(free))
}

// The pseudocode's newJob, case by case on a 64-slot cluster.
func TestNewJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    Job
		free int
		run  []Job
		want Start
	}{
		{"fits at max: min(free-1, max) = max", arriving(3, 2, 8), 20, nil, Start{Workers: 8}},
		{"starts with free-1 when that reaches min and nothing can shrink", arriving(3, 2, 8), 6, nil, Start{Workers: 5}},
		{"free-1 below min and nothing to shrink: waits", arriving(3, 4, 8), 4, nil, Start{}},
		{
			"shrinks the lowest priority first, only what max needs",
			arriving(3, 2, 8), 3,
			[]Job{running("p2", 2, 0, 4, 16, 16), running("p1", 1, 0, 4, 16, 16)},
			Start{Workers: 8, Shrinks: []Shrink{{"p1", 16, 10}}},
		},
		{
			"walks on to the next priority once the lowest is at its minimum",
			arriving(3, 2, 16), 1,
			[]Job{running("p2", 2, 0, 4, 16, 16), running("p1", 1, 0, 4, 16, 8)},
			Start{Workers: 16, Shrinks: []Shrink{{"p1", 8, 4}, {"p2", 16, 4}}},
		},
		{
			"equal priority may shrink, the latest submitted first",
			arriving(3, 2, 8), 1,
			[]Job{running("early", 3, 0, 2, 8, 8), running("late", 3, 10, 2, 8, 8)},
			Start{Workers: 8, Shrinks: []Shrink{{"late", 8, 2}, {"early", 8, 6}}},
		},
		{
			"stops at strictly higher priority",
			arriving(3, 2, 8), 1,
			[]Job{running("high", 4, 0, 2, 16, 16), running("low", 1, 0, 2, 4, 4)},
			Start{Workers: 2, Shrinks: []Shrink{{"low", 4, 2}}},
		},
		{
			"never below a job's minimum: the minimum cannot be freed, nothing is shrunk",
			arriving(3, 8, 8), 1,
			[]Job{running("a", 1, 0, 4, 8, 8), running("b", 2, 0, 6, 8, 7)},
			Start{},
		},
		{
			"a job inside its rescale gap is skipped, the walk goes on",
			arriving(3, 2, 8), 1,
			[]Job{func() Job {
				j := running("fresh", 1, 0, 2, 16, 16)
				j.LastRescale = now.Add(-30 * time.Second)
				return j
			}(),
				running("old", 2, 0, 2, 16, 16)},
			Start{Workers: 8, Shrinks: []Shrink{{"old", 16, 8}}},
		},
		{
			"a job without a rescale hook is never shrunk",
			arriving(3, 2, 8), 1,
			[]Job{func() Job { j := running("moldable", 1, 0, 2, 16, 16); j.Rescalable = false; return j }()},
			Start{},
		},
		{
			"rigid new job (min = max) shrinks for exactly its size",
			arriving(3, 6, 6), 3,
			[]Job{running("p1", 1, 0, 2, 16, 16)},
			Start{Workers: 6, Shrinks: []Shrink{{"p1", 16, 12}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.j, tc.free, tc.run)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NewJob (-want +got):\n%s", diff)
			}
		})
	}
}

// Slots is min(free - 1, max) whatever the cluster: every start size NewJob picks on a slot
// cluster without victims.
func TestStartSizeIsFreeMinusOne(t *testing.T) {
	for free := 0; free <= 70; free++ {
		for _, j := range []Job{arriving(1, 2, 8), arriving(1, 16, 64), arriving(1, 1, 1)} {
			want := min(free-1, j.Max)
			if want < j.Min {
				want = 0
			}
			if got := decide(j, free, nil).Workers; got != want {
				t.Fatalf("free %d, job %d..%d: starts with %d, want %d", free, j.Min, j.Max, got, want)
			}
		}
	}
}

// Whatever the cluster, newJob never takes a job below its minimum, never takes from a job it may
// not shrink, and never starts a job below its minimum.
func TestNewJobInvariants(t *testing.T) {
	for free := 0; free < 12; free++ {
		for mask := 0; mask < 1<<4; mask++ {
			run := []Job{running("a", 1, 0, 2, 8, 8), running("b", 2, 1, 1, 4, 3), running("c", 5, 2, 4, 16, 12), running("d", 3, 3, 2, 2, 2)}
			for i := range run {
				if mask&(1<<i) != 0 {
					run[i].LastRescale = now
				}
			}
			j := arriving(3, 3, 12)
			got := decide(j, free, run)
			byKey := map[string]Job{}
			for _, r := range run {
				byKey[r.Key] = r
			}
			freed := 0
			for _, s := range got.Shrinks {
				r := byKey[s.Key]
				switch {
				case s.To < r.Min || s.To >= s.From || s.From != r.Workers:
					t.Fatalf("free %d mask %b: %+v breaks %s's bounds", free, mask, s, s.Key)
				case r.Priority > j.Priority || !r.Due(now):
					t.Fatalf("free %d mask %b: shrank %s (priority %d, due %v)", free, mask, s.Key, r.Priority, r.Due(now))
				}
				freed += s.From - s.To
			}
			if got.Workers != 0 && (got.Workers < j.Min || got.Workers > j.Max || got.Workers > free+freed-1) {
				t.Fatalf("free %d mask %b: starts with %d workers, %d freed", free, mask, got.Workers, freed)
			}
			if got.Workers == 0 && len(got.Shrinks) > 0 {
				t.Fatalf("free %d mask %b: shrank %+v for a job that does not start", free, mask, got.Shrinks)
			}
		}
	}
}

// completeJob: freed capacity goes to running and waiting jobs in priority order; a waiting job
// only counts when it reaches its minimum, so one that can never fit does not block growth.
func TestMayGrow(t *testing.T) {
	r := running("run", 3, 5, 2, 8, 4)
	waitHigh := Job{Key: "high", Priority: 5, Submitted: t0.Add(time.Hour), Min: 4, Max: 8}
	waitLow := Job{Key: "low", Priority: 1, Submitted: t0, Min: 1, Max: 2}
	waitEqualEarlier := Job{Key: "eq", Priority: 3, Submitted: t0, Min: 1, Max: 2}
	fits := func(ok bool) func(Job) bool { return func(Job) bool { return ok } }
	for _, tc := range []struct {
		name    string
		j       Job
		waiting []Job
		fits    func(Job) bool
		want    bool
	}{
		{"nothing waits", r, nil, fits(true), true},
		{"a higher-priority waiting job that starts now goes first", r, []Job{waitHigh}, fits(true), false},
		{"a higher-priority waiting job that cannot start does not block", r, []Job{waitHigh}, fits(false), true},
		{"a lower-priority waiting job comes after", r, []Job{waitLow}, fits(true), true},
		{"equal priority: the earlier submitted first", r, []Job{waitEqualEarlier}, fits(true), false},
		{"at its maximum", func() Job { j := r; j.Workers = 8; return j }(), nil, fits(true), false},
		{"inside its gap", func() Job { j := r; j.LastRescale = now; return j }(), nil, fits(true), false},
		{"without a hook", func() Job { j := r; j.Rescalable = false; return j }(), nil, fits(true), false},
	} {
		if got := MayGrow(tc.j, tc.waiting, now, tc.fits); got != tc.want {
			t.Errorf("%s: MayGrow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// completeJob on slots: a job ends; the waiting and running jobs take what it freed in priority
// order, each up to its maximum, a waiting one only from its minimum; a waiting job that can never
// fit does not block those after it; a job without a hook or inside its gap is passed over.
func TestCompleteJob(t *testing.T) {
	noHook := running("r-nohook", 8, 0, 2, 8, 2)
	noHook.Rescalable = false
	inGap := running("r-gap", 7, 0, 2, 8, 2)
	inGap.LastRescale = now
	jobs := []Job{
		running("r-low", 1, 0, 2, 8, 2),
		running("r-high", 4, 1, 2, 8, 6),
		{Key: "w-huge", Priority: 9, Submitted: t0, Min: 40, Max: 64},
		{Key: "w-mid", Priority: 3, Submitted: t0, Min: 2, Max: 4},
		{Key: "w-late", Priority: 3, Submitted: t0.Add(time.Minute), Min: 2, Max: 4},
		noHook, inGap,
	}
	room := &SlotRoom{Free: 10}
	got := CompleteJob(jobs, now, room)
	want := []Grant{{"r-high", 6, 8}, {"w-mid", 0, 4}, {"w-late", 0, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completeJob (-want +got):\n%s", diff)
	}
	if room.Free != 0 {
		t.Errorf("%d slots left, want 0", room.Free)
	}
	// With more room the later of the equal-priority waiting jobs reaches its maximum too, and
	// the lowest-priority running job grows by the one slot left.
	got = CompleteJob(jobs, now, &SlotRoom{Free: 13})
	want = []Grant{{"r-high", 6, 8}, {"w-mid", 0, 4}, {"w-late", 0, 4}, {"r-low", 2, 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completeJob with 13 free (-want +got):\n%s", diff)
	}
}

func TestAging(t *testing.T) {
	off := Aging{}
	if got := off.Priority(3, 100*time.Hour); got != 3 {
		t.Errorf("aging off: %d, want 3", got)
	}
	a := Aging{PerHour: 2}
	for _, tc := range []struct {
		base   int32
		waited time.Duration
		want   int32
	}{{1, 0, 1}, {1, 29 * time.Minute, 1}, {1, 30 * time.Minute, 2}, {1, 3 * time.Hour, 7}, {math.MaxInt32 - 1, 10 * time.Hour, math.MaxInt32}} {
		if got := a.Priority(tc.base, tc.waited); got != tc.want {
			t.Errorf("priority %d after %v at 2/h: %d, want %d", tc.base, tc.waited, got, tc.want)
		}
	}
}
