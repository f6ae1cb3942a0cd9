package framework

import (
	"context"
	"errors"
	"testing"
	"time"
)

// pollInterval returns how often to check within timeout: every 100 ms, faster for short
// deadlines (a 1 s drift-repair deadline is checked every 20 ms).
func pollInterval(timeout time.Duration) time.Duration {
	iv := timeout / 50
	if iv > 100*time.Millisecond {
		iv = 100 * time.Millisecond
	}
	if iv < 5*time.Millisecond {
		iv = 5 * time.Millisecond
	}
	return iv
}

// callGrace is the least time a Poll or Consistently check gets for its API calls: client-go's
// rate limiter refuses to wait past a context's deadline, so a call near the end of a poll with
// a context ending at that end would fail for lack of time, hiding the error that matters.
const callGrace = 10 * time.Second

// permanentError marks an error no further check can cure.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps an error a check returns when waiting longer cannot help (the job already
// ended in another phase): Poll returns it at once instead of waiting out its timeout.
func Permanent(err error) error { return permanentError{err} }

// Poll calls check until it returns nil, then returns nil and how long that took, or returns
// check's last error once timeout has passed, or at once a Permanent one. Each call gets a context that ends at the
// deadline or callGrace after the call starts, whichever is later.
func Poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	end := time.NewTimer(timeout)
	defer end.Stop()
	tick := time.NewTicker(pollInterval(timeout))
	defer tick.Stop()
	var last error
	for {
		cctx, cancel := context.WithDeadline(ctx, later(deadline, time.Now().Add(callGrace)))
		err := check(cctx)
		cancel()
		if err == nil {
			return time.Since(start), nil
		}
		if errors.As(err, new(permanentError)) {
			return time.Since(start), err
		}
		// A check cut short by its deadline says less than the one before it.
		if last == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			last = err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), last
		case <-end.C:
			return time.Since(start), last
		case <-tick.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Eventually polls check until it returns nil and returns how long that took; after timeout it
// fails the test, naming what it waited for and check's last error.
func Eventually(t testing.TB, what string, timeout time.Duration, check func(ctx context.Context) error) time.Duration {
	t.Helper()
	took, err := Poll(context.Background(), timeout, check)
	if err != nil {
		t.Fatalf("waited %v for %s: %v", timeout, what, err)
	}
	return took
}

// Consistently calls check for the whole duration and fails the test at its first error, naming
// what must have held. Each call has callGrace for its API calls, the last one included.
func Consistently(t testing.TB, what string, duration time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	tick := time.NewTicker(pollInterval(duration))
	defer tick.Stop()
	start := time.Now()
	end := time.After(duration)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callGrace)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s stopped holding after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-end:
			return
		case <-tick.C:
		}
	}
}
