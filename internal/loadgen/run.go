package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Doer sends one request and waits for its answer; an error (transport, status, timeout) makes
// the request count as failed.
type Doer func(ctx context.Context) error

// Options configure a run.
type Options struct {
	Trace Trace
	// Timeout bounds one request from its send; past it the request counts as an error.
	Timeout time.Duration
	// MaxInFlight bounds the requests outstanding at once (the generator's own resources); a
	// request scheduled while the bound is reached is not sent and counts as an error
	// (ErrInFlight), so that the schedule never bends to the service.
	MaxInFlight int
	// Record keeps every request's Sample in the report (tests, small runs).
	Record bool
}

// DefaultOptions: 30 s timeout, 20,000 requests in flight.
func DefaultOptions(t Trace) Options {
	return Options{Trace: t, Timeout: 30 * time.Second, MaxInFlight: 20_000}
}

// ErrInFlight is the error of a request not sent because MaxInFlight requests were outstanding.
var ErrInFlight = errors.New("not sent: the generator's in-flight limit was reached")

// Sample is one request.
type Sample struct {
	// Scheduled is its send time on the schedule, Sent when it was sent and Done when its
	// answer (or failure) came, as offsets from the run's start.
	Scheduled, Sent, Done time.Duration
	Err                   error
}

// Latency is the request's latency without coordinated omission: from its scheduled send time
// to its answer.
func (s Sample) Latency() time.Duration { return s.Done - s.Scheduled }

// Run sends the trace's requests through do at their scheduled times, each in its own
// goroutine (open loop: no request waits for another), until the schedule ends or ctx is done,
// then waits for the outstanding answers and returns the report.
func Run(ctx context.Context, o Options, do Doer) (*Report, error) {
	if err := o.Trace.Validate(); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 || o.MaxInFlight <= 0 {
		return nil, fmt.Errorf("timeout %s and in-flight limit %d: want both positive", o.Timeout, o.MaxInFlight)
	}
	start := time.Now()
	rec := newRecorder(o.Trace, start, o.Record)
	sem := make(chan struct{}, o.MaxInFlight)
	var wg sync.WaitGroup
	sched := o.Trace.Schedule()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
dispatch:
	for {
		at, ok := sched.Next()
		if !ok {
			break
		}
		// Sleep only when the send time is ahead; late sends (the generator fell behind) go at
		// once and their latency still runs from the schedule.
		if wait := time.Until(start.Add(at)); wait > 50*time.Microsecond {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				break dispatch
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			now := time.Since(start)
			rec.add(Sample{Scheduled: at, Sent: now, Done: now, Err: ErrInFlight})
			continue
		}
		wg.Add(1)
		go func(at time.Duration) {
			defer wg.Done()
			defer func() { <-sem }()
			sent := time.Since(start)
			rctx, cancel := context.WithTimeout(ctx, o.Timeout)
			err := do(rctx)
			cancel()
			rec.add(Sample{Scheduled: at, Sent: sent, Done: time.Since(start), Err: err})
		}(at)
	}
	wg.Wait()
	return rec.report(time.Since(start)), nil
}

// HTTPGet returns a Doer that GETs url with client and counts any status but 2xx as an error;
// it reads and discards the body, so the connection is reused.
func HTTPGet(client *http.Client, url string) (Doer, error) {
	if _, err := http.NewRequest(http.MethodGet, url, nil); err != nil {
		return nil, fmt.Errorf("target URL %q: %w", url, err)
	}
	return func(ctx context.Context) error { return Get(ctx, client, url) }, nil
}

// Get is one request of HTTPGet's Doer, for Doers that choose the URL per request: any status
// but 2xx is an error, and the body is read and discarded so the connection is reused.
func Get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, cerr := drain(resp)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return cerr
}

// NewHTTPClient returns a client for open-loop load: many idle connections kept per host, no
// overall timeout (Options.Timeout bounds each request).
func NewHTTPClient(maxConns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = maxConns
	tr.MaxIdleConnsPerHost = maxConns
	return &http.Client{Transport: tr}
}
