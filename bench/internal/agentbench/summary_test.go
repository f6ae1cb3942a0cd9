package agentbench

import (
	"slices"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	in := slices.Clone(ds)
	got := Summarize(ds)
	want := Summary{N: 100, Min: time.Millisecond, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if got != want {
		t.Errorf("Summarize(100 ms .. 1 ms) = %+v, want %+v", got, want)
	}
	if !slices.Equal(ds, in) {
		t.Error("Summarize reordered its input")
	}
	// Nearest rank over three values: p50 is the second, p90 and p99 the third.
	got = Summarize([]time.Duration{30, 10, 20})
	if want := (Summary{N: 3, Min: 10, P50: 20, P90: 30, P99: 30, Max: 30}); got != want {
		t.Errorf("Summarize(30, 10, 20) = %+v, want %+v", got, want)
	}
	if got := Summarize([]time.Duration{7}); got != (Summary{N: 1, Min: 7, P50: 7, P90: 7, P99: 7, Max: 7}) {
		t.Errorf("Summarize(7) = %+v", got)
	}
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want the zero Summary", got)
	}
}

func TestFormat(t *testing.T) {
	if got := Millis(1500 * time.Microsecond); got != "1.50 ms" {
		t.Errorf("Millis(1.5ms) = %q", got)
	}
	if got := Millis(3 * time.Second); got != "3000.00 ms" {
		t.Errorf("Millis(3s) = %q", got)
	}
	if got := Micros(42500 * time.Nanosecond); got != "42.5 µs" {
		t.Errorf("Micros(42.5µs) = %q", got)
	}
}
