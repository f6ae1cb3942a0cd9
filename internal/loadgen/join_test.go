package loadgen

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorded is the report of a run that started at start under trace and made these requests.
func recorded(start time.Time, trace Trace, samples ...Sample) *Report {
	rec := newRecorder(trace, start, true)
	for _, s := range samples {
		rec.add(s)
	}
	return rec.report(trace.Duration())
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestJoin(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)
	// The first run, 60 s at 100 requests/s, cut short after 2.5 s: a request at 0.1 s (5 ms),
	// one at 1.2 s (40 ms) and one at 2.4 s that failed.
	first := recorded(t0, Trace{{time.Minute, 100}},
		Sample{Scheduled: ms(100), Sent: ms(100), Done: ms(105)},
		Sample{Scheduled: ms(1200), Sent: ms(1200), Done: ms(1240)},
		Sample{Scheduled: ms(2400), Sent: ms(2400), Done: ms(2410), Err: errors.New("refused")},
	)
	// The second, 2 s at 20 requests/s, began 2.5 s after the first: requests at 0.2 s (10 ms)
	// and 1.6 s (20 ms) of its own time, 2.7 s and 4.1 s of the first's.
	next := recorded(t0.Add(ms(2500)), Trace{{2 * time.Second, 20}},
		Sample{Scheduled: ms(200), Sent: ms(200), Done: ms(210)},
		Sample{Scheduled: ms(1600), Sent: ms(1600), Done: ms(1620)},
	)
	got, err := Join(first, next)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Start.Equal(t0) {
		t.Errorf("start %s, want the first run's %s", got.Start, t0)
	}
	wantTrace := Trace{{ms(2500), 100}, {2 * time.Second, 20}}
	if diff := cmp.Diff(wantTrace, got.Trace); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	want := []Second{
		{Second: 0, OfferedRate: 100, Offered: 1, Achieved: 1, P50Seconds: 0.005, P99Seconds: 0.005, MaxSeconds: 0.005},
		{Second: 1, OfferedRate: 100, Offered: 1, Achieved: 1, P50Seconds: 0.04, P99Seconds: 0.04, MaxSeconds: 0.04},
		{Second: 2, OfferedRate: 100, Offered: 2, Achieved: 1, Errors: 1, P50Seconds: 0.01, P99Seconds: 0.01, MaxSeconds: 0.01},
		{Second: 3, OfferedRate: 20},
		{Second: 4, OfferedRate: 20, Offered: 1, Achieved: 1, P50Seconds: 0.02, P99Seconds: 0.02, MaxSeconds: 0.02},
	}
	if diff := cmp.Diff(want, got.Seconds); diff != "" {
		t.Errorf("seconds (-want +got):\n%s", diff)
	}
	if s := got.Summary; s.Requests != 5 || s.Errors != 1 || s.MaxSeconds != 0.04 || s.P50Seconds != 0.01 {
		t.Errorf("summary %+v: want 5 requests, 1 error, median 10 ms, max 40 ms", s)
	}
}

func TestJoinNeedsSamples(t *testing.T) {
	t0 := time.Now()
	first := recorded(t0, Trace{{time.Second, 10}}, Sample{Scheduled: ms(10), Done: ms(20)})
	next := recorded(t0.Add(time.Second), Trace{{time.Second, 10}})
	unrecorded := *first
	unrecorded.Samples = nil
	if _, err := Join(&unrecorded, next); err == nil {
		t.Error("joined a report without its samples")
	}
	if _, err := Join(next, first); err == nil {
		t.Error("joined a run to one that began before it")
	}
}

func TestTraceUntil(t *testing.T) {
	tr := Trace{{10 * time.Second, 1}, {5 * time.Second, 2}}
	for _, c := range []struct {
		d    time.Duration
		want Trace
	}{
		{0, nil},
		{4 * time.Second, Trace{{4 * time.Second, 1}}},
		{10 * time.Second, Trace{{10 * time.Second, 1}}},
		{12 * time.Second, Trace{{10 * time.Second, 1}, {2 * time.Second, 2}}},
		{time.Minute, tr},
	} {
		if diff := cmp.Diff(c.want, tr.Until(c.d)); diff != "" {
			t.Errorf("Until(%s) (-want +got):\n%s", c.d, diff)
		}
	}
}
