package loadgen

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Second is one second of the run, by scheduled send time: Offered the requests scheduled in it,
// Errors how many of those failed, and the latency percentiles of those that succeeded (from
// their scheduled time); Achieved counts the requests that succeeded with their answer in it.
type Second struct {
	Second      int     `json:"second"`
	OfferedRate float64 `json:"offeredRate"`
	Offered     int     `json:"offered"`
	Achieved    int     `json:"achieved"`
	Errors      int     `json:"errors"`
	P50Seconds  float64 `json:"p50Seconds"`
	P99Seconds  float64 `json:"p99Seconds"`
	MaxSeconds  float64 `json:"maxSeconds"`
}

// Summary is the whole run. Latencies are of the requests that succeeded, from their scheduled
// send time; MaxSendLagSeconds is how late the generator sent a request at worst (its own
// health: large values mean it could not keep the schedule, which the latencies already count).
type Summary struct {
	DurationSeconds   float64 `json:"durationSeconds"`
	Requests          int     `json:"requests"`
	Errors            int     `json:"errors"`
	InFlightRefused   int     `json:"inFlightRefused"`
	OfferedRate       float64 `json:"offeredRate"`
	AchievedRate      float64 `json:"achievedRate"`
	P50Seconds        float64 `json:"p50Seconds"`
	P90Seconds        float64 `json:"p90Seconds"`
	P99Seconds        float64 `json:"p99Seconds"`
	P999Seconds       float64 `json:"p999Seconds"`
	MaxSeconds        float64 `json:"maxSeconds"`
	MaxSendLagSeconds float64 `json:"maxSendLagSeconds"`
}

// Report is what a run produces, written as JSON.
type Report struct {
	Start   time.Time `json:"start"`
	Trace   Trace     `json:"trace"`
	Seconds []Second  `json:"seconds"`
	Summary Summary   `json:"summary"`
	// Samples are every request, when Options.Record asked for them.
	Samples []Sample `json:"-"`
}

// recorder collects samples from the request goroutines.
type recorder struct {
	trace  Trace
	start  time.Time
	keep   bool
	mu     sync.Mutex
	secs   []secAcc
	all    []time.Duration
	errs   int
	refuse int
	lag    time.Duration
	kept   []Sample
}

type secAcc struct {
	offered, achieved, errors int
	lat                       []time.Duration
}

func newRecorder(t Trace, start time.Time, keep bool) *recorder {
	return &recorder{trace: t, start: start, keep: keep, secs: make([]secAcc, int(t.Duration().Seconds())+1)}
}

// sec returns the accumulator of second i, growing the series when answers come after the
// trace's end.
func (r *recorder) sec(i int) *secAcc {
	for len(r.secs) <= i {
		r.secs = append(r.secs, secAcc{})
	}
	return &r.secs[i]
}

func (r *recorder) add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sch := r.sec(int(s.Scheduled / time.Second))
	sch.offered++
	r.lag = max(r.lag, s.Sent-s.Scheduled)
	switch {
	case errors.Is(s.Err, ErrInFlight):
		sch.errors++
		r.errs++
		r.refuse++
	case s.Err != nil:
		sch.errors++
		r.errs++
	default:
		sch.lat = append(sch.lat, s.Latency())
		r.all = append(r.all, s.Latency())
		r.sec(int(s.Done/time.Second)).achieved++
	}
	if r.keep {
		r.kept = append(r.kept, s)
	}
}

func (r *recorder) report(took time.Duration) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{Start: r.start, Trace: r.trace, Samples: r.kept}
	requests := 0
	for i := range r.secs {
		a := &r.secs[i]
		slices.Sort(a.lat)
		requests += a.offered
		rep.Seconds = append(rep.Seconds, Second{
			Second: i, OfferedRate: r.trace.RateAt(time.Duration(i) * time.Second), Offered: a.offered, Achieved: a.achieved, Errors: a.errors,
			P50Seconds: quantile(a.lat, 0.50), P99Seconds: quantile(a.lat, 0.99), MaxSeconds: quantile(a.lat, 1),
		})
	}
	slices.Sort(r.all)
	d := r.trace.Duration().Seconds()
	rep.Summary = Summary{
		DurationSeconds: took.Seconds(), Requests: requests, Errors: r.errs, InFlightRefused: r.refuse,
		OfferedRate: float64(requests) / d, AchievedRate: float64(len(r.all)) / d,
		P50Seconds: quantile(r.all, 0.50), P90Seconds: quantile(r.all, 0.90), P99Seconds: quantile(r.all, 0.99),
		P999Seconds: quantile(r.all, 0.999), MaxSeconds: quantile(r.all, 1), MaxSendLagSeconds: r.lag.Seconds(),
	}
	return rep
}

// quantile is the nearest-rank q-quantile of sorted latencies, in seconds (0 for none).
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i].Seconds()
}

// drain reads a response body to its end (bounded) and closes it.
func drain(resp *http.Response) (int64, error) {
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<20))
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return n, err
}
