package agentbench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary describes a set of durations by nearest-rank percentiles; the zero Summary (N 0)
// describes none.
type Summary struct {
	N   int           `json:"n"`
	Min time.Duration `json:"minNs"`
	P50 time.Duration `json:"p50Ns"`
	P90 time.Duration `json:"p90Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
}

// Summarize sorts a copy of ds and takes its percentiles: the p-th is the smallest value with at
// least p % of the set at or below it. ds is left as it is.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Summary{N: len(s), Min: s[0], P50: rank(50), P90: rank(90), P99: rank(99), Max: s[len(s)-1]}
}

// Millis formats d as milliseconds with two decimals ("1.50 ms").
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// Micros formats d as microseconds with one decimal ("42.5 µs").
func Micros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
