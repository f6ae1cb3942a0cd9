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

// Poll calls check until it returns nil, then returns nil and how long that took, or returns
// check's last error once timeout has passed. Each call gets a context that ends at the deadline.
func Poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval(timeout))
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return time.Since(start), nil
		}
		// A check cut short by the deadline says less than the one before it.
		if last == nil || ctx.Err() == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			last = err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), last
		case <-tick.C:
		}
	}
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
// what must have held.
func Consistently(t testing.TB, what string, duration time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	tick := time.NewTicker(pollInterval(duration))
	defer tick.Stop()
	start := time.Now()
	for {
		if err := check(ctx); err != nil && ctx.Err() == nil {
			t.Fatalf("%s stopped holding after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
