package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTrace(t *testing.T) {
	got, err := ParseTrace("2s@100, 500ms@0,1m@2.5")
	if err != nil {
		t.Fatal(err)
	}
	want := Trace{{2 * time.Second, 100}, {500 * time.Millisecond, 0}, {time.Minute, 2.5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.Duration() != 62500*time.Millisecond {
		t.Errorf("duration %s", got.Duration())
	}
	for _, bad := range []string{"", "2s", "x@1", "2s@x", "0s@1", "1s@-1", "1s@2000000", "25h@1"} {
		if _, err := ParseTrace(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReadTrace(t *testing.T) {
	want := Trace{{30 * time.Second, 100}, {time.Minute, 400}}
	for _, in := range []string{
		`[{"duration":"30s","rate":100},{"duration":"1m","rate":400}]`,
		"# warm up\n30s 100\n\n1m 400  # peak\n",
	} {
		got, err := ReadTrace(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", in, diff)
		}
	}
	for _, bad := range []string{"30s\n", "30s 1 2\n", `[{"duration":"x","rate":1}]`, "", "# only a comment\n"} {
		if _, err := ReadTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	b, err := json.Marshal(want)
	if err != nil || string(b) != `[{"duration":"30s","rate":100},{"duration":"1m0s","rate":400}]` {
		t.Errorf("JSON %s, %v", b, err)
	}
}

func TestSchedule(t *testing.T) {
	s := Trace{{time.Second, 4}, {time.Second, 0}, {500 * time.Millisecond, 10}}.Schedule()
	var got []time.Duration
	for at, ok := s.Next(); ok; at, ok = s.Next() {
		got = append(got, at)
	}
	ms := time.Millisecond
	want := []time.Duration{0, 250 * ms, 500 * ms, 750 * ms, 2000 * ms, 2100 * ms, 2200 * ms, 2300 * ms, 2400 * ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// stallServer answers at once, except that every request it receives during [from, to) of the
// test waits until to: the service stops, as in a GC pause or a CPU taken away.
func stallServer(t *testing.T, start time.Time, from, to time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if now := time.Since(start); now >= from && now < to {
			time.Sleep(to - now)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCoordinatedOmission is the classic test: at 200 requests/s for 2 s against a service that
// stops from 0.5 s to 1.3 s, every request scheduled during the stall must show it — its latency
// runs from its scheduled time to the end of the stall — and the generator must have kept
// sending on schedule meanwhile. A closed-loop client (send, wait, send) would have recorded one
// slow request and then none, for a p99 near zero.
func TestCoordinatedOmission(t *testing.T) {
	const rate = 200
	from, to := 500*time.Millisecond, 1300*time.Millisecond
	// The run starts a moment after the server's clock; the stall window is placed on the run's.
	start := time.Now()
	srv := stallServer(t, start, from, to)
	do, err := HTTPGet(NewHTTPClient(1000), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(Trace{{2 * time.Second, rate}})
	o.Record = true
	rep, err := Run(context.Background(), o, do)
	if err != nil {
		t.Fatal(err)
	}
	skew := time.Since(start) - time.Duration(rep.Summary.DurationSeconds*float64(time.Second))
	const slack = 30 * time.Millisecond
	stalled := 0
	for _, s := range rep.Samples {
		if s.Err != nil {
			t.Fatalf("request scheduled at %s failed: %v", s.Scheduled, s.Err)
		}
		sched := s.Scheduled + skew
		if sched >= from+slack && sched < to-slack {
			stalled++
			if want := to - sched - slack; s.Latency() < want {
				t.Errorf("request scheduled at %s (server time %s) during the stall: latency %s, want at least %s", s.Scheduled, sched, s.Latency(), want)
			}
			if lag := s.Sent - s.Scheduled; lag > 100*time.Millisecond {
				t.Errorf("request scheduled at %s during the stall was sent %s late: the generator waited for the service", s.Scheduled, lag)
			}
		}
	}
	if want := int(0.9 * rate * (to - from - 2*slack).Seconds()); stalled < want {
		t.Errorf("%d requests scheduled during the stall, want at least %d", stalled, want)
	}
	if len(rep.Samples) != 2*rate || rep.Summary.Requests != 2*rate {
		t.Errorf("%d samples, %d requests, want %d", len(rep.Samples), rep.Summary.Requests, 2*rate)
	}
	// Second 0 holds 100 requests, those from 0.5 s on stalled 0.3 to 0.8 s: its p99 shows the
	// stall; so does the run's.
	if p := rep.Seconds[0].P99Seconds; p < 0.7 {
		t.Errorf("second 0's p99 %.3f s, want the stall (≥ 0.7 s)", p)
	}
	if p := rep.Summary.P99Seconds; p < 0.7 {
		t.Errorf("run's p99 %.3f s, want the stall (≥ 0.7 s)", p)
	}
	// 40% of the requests stalled, for 0 to 0.8 s: the slowest tenth waited at least 0.6 s.
	if p := rep.Summary.P90Seconds; p < 0.5 {
		t.Errorf("run's p90 %.3f s, want the stall's tail (≥ 0.5 s)", p)
	}
	if rep.Seconds[1].Achieved < 150 {
		t.Errorf("second 1 achieved %d: the stall's requests all answer at 1.3 s", rep.Seconds[1].Achieved)
	}
}

// TestErrors: a failing status, a timeout and the in-flight limit each count as errors of the
// second they were scheduled in, never as latencies.
func TestErrors(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	do, err := HTTPGet(NewHTTPClient(10), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), DefaultOptions(Trace{{time.Second, 20}}), do)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Errors != 10 || rep.Seconds[0].Errors != 10 || rep.Summary.Requests != 20 {
		t.Errorf("summary %+v second 0 %+v, want 10 of 20 failed", rep.Summary, rep.Seconds[0])
	}

	block := make(chan struct{})
	defer close(block)
	o := DefaultOptions(Trace{{500 * time.Millisecond, 20}})
	o.Timeout, o.MaxInFlight = 200*time.Millisecond, 3
	rep, err = Run(context.Background(), o, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-block:
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Errors != 10 || rep.Summary.InFlightRefused == 0 || rep.Summary.P99Seconds != 0 {
		t.Errorf("summary %+v: want every request failed, some refused by the in-flight limit, no latency", rep.Summary)
	}
	if _, err := Run(context.Background(), Options{Trace: Trace{{time.Second, 1}}}, nil); err == nil {
		t.Error("zero timeout and in-flight limit accepted")
	}
	if _, err := HTTPGet(http.DefaultClient, "http://[::1"); err == nil {
		t.Error("a bad URL accepted")
	}
}

// BenchmarkOverhead is the generator's own cost per request: scheduling, a goroutine, timing
// and recording, against a Doer that returns at once (at 1,000,000 requests/s, so the schedule
// never waits).
func BenchmarkOverhead(b *testing.B) {
	b.ReportAllocs()
	o := DefaultOptions(Trace{{time.Duration(float64(b.N) / MaxRate * float64(time.Second)), MaxRate}})
	if o.Trace[0].Duration <= 0 {
		o.Trace[0].Duration = time.Microsecond
	}
	b.ResetTimer()
	if _, err := Run(context.Background(), o, func(context.Context) error { return nil }); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHTTP is one request through HTTPGet to an in-process server, sent open-loop at
// 5,000 requests/s with at most 256 outstanding: the generator and the loopback together. It
// reports the run's p99 and the requests the in-flight limit refused (the machine could not
// keep up).
func BenchmarkHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	do, err := HTTPGet(NewHTTPClient(256), srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	const rate = 5000
	o := DefaultOptions(Trace{{time.Duration(float64(b.N)/rate*float64(time.Second)) + time.Microsecond, rate}})
	o.MaxInFlight = 256
	b.ResetTimer()
	rep, err := Run(context.Background(), o, do)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rep.Summary.P99Seconds*1e6, "p99-µs")
	b.ReportMetric(float64(rep.Summary.InFlightRefused), "refused")
}

// FuzzParseTrace: whatever the flag parser accepts is a valid trace whose schedule has as many
// requests as its steps ask for, in order.
func FuzzParseTrace(f *testing.F) {
	f.Add("60s@100,2m@400")
	f.Add("1ms@1000000,1s@0.5")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTrace(s)
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted %q: %v", s, err)
		}
		checkSchedule(t, tr)
	})
}

// FuzzReadTrace: the same for trace files.
func FuzzReadTrace(f *testing.F) {
	f.Add(`[{"duration":"30s","rate":100}]`)
	f.Add("30s 100\n1m 0 # pause\n")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ReadTrace(strings.NewReader(s))
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted %q: %v", s, err)
		}
		checkSchedule(t, tr)
	})
}

// checkSchedule walks a short trace's schedule (long ones only their first 10,000 sends).
func checkSchedule(t *testing.T, tr Trace) {
	sched := tr.Schedule()
	last := time.Duration(-1)
	for i := 0; i < 10_000; i++ {
		at, ok := sched.Next()
		if !ok {
			return
		}
		if at < last || at >= tr.Duration() {
			t.Fatalf("trace %v: send %d at %s after %s (trace %s long)", tr, i, at, last, tr.Duration())
		}
		last = at
	}
}
