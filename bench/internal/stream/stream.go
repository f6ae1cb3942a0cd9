// Package stream measures sustainable memory bandwidth with the four STREAM kernels — copy
// (c=a), scale (b=s·c), add (c=a+b) and triad (a=b+s·c) — written in Go over arrays several times
// larger than the last-level cache. Like STREAM it repeats the kernels, reports the best, average
// and worst time of each with the first pass left out, and validates the arrays against the
// values the kernels must have produced. It owns the kernels and their checks; it does not
// choose how many processes run or where.
package stream

import (
	"fmt"
	"math"
	"time"
)

// Kernel is the timing of one STREAM kernel.
type Kernel struct {
	Name string
	// Bytes moved by one pass: 2 arrays for copy and scale, 3 for add and triad.
	Bytes int64
	// Min, Avg and Max time of one pass, the first pass excluded.
	Min, Avg, Max time.Duration
}

// BestGBs is the rate STREAM reports: Bytes over the fastest pass, in 10⁹ bytes per second.
func (k Kernel) BestGBs() float64 { return float64(k.Bytes) / k.Min.Seconds() / 1e9 }

// AvgGBs is the sustained rate: Bytes over the average pass.
func (k Kernel) AvgGBs() float64 { return float64(k.Bytes) / k.Avg.Seconds() / 1e9 }

// Result is one run of every kernel NTimes times.
type Result struct {
	Len, NTimes int
	Seconds     float64
	Kernels     []Kernel // copy, scale, add, triad
}

// Triad returns the triad kernel, the figure EP-STREAM compares.
func (r Result) Triad() Kernel { return r.Kernels[3] }

// scalar is STREAM's scale factor.
const scalar = 3.0

// Arrays are the three STREAM arrays, allocated and written once so that their pages exist
// before timing starts.
type Arrays struct {
	a, b, c []float64
}

// Minimum sizes keep the check meaningful and the run within memory.
const (
	minLen = 1000
	maxLen = 1 << 32
)

// Prepare allocates three arrays of n float64 each and initialises them as STREAM does.
func Prepare(n int) (*Arrays, error) {
	if n < minLen || n > maxLen {
		return nil, fmt.Errorf("STREAM array length %d out of range: use %d to %d elements", n, minLen, maxLen)
	}
	s := &Arrays{a: make([]float64, n), b: make([]float64, n), c: make([]float64, n)}
	for i := range s.a {
		s.a[i], s.b[i], s.c[i] = 1, 2, 0
	}
	for i := range s.a {
		s.a[i] *= 2
	}
	return s, nil
}

// Run times ntimes passes of the four kernels, then validates the arrays.
func (s *Arrays) Run(ntimes int) (Result, error) {
	if ntimes < 2 {
		return Result{}, fmt.Errorf("STREAM needs at least 2 passes (the first is not counted), got %d", ntimes)
	}
	n := int64(len(s.a))
	kernels := []Kernel{
		{Name: "copy", Bytes: 2 * 8 * n},
		{Name: "scale", Bytes: 2 * 8 * n},
		{Name: "add", Bytes: 3 * 8 * n},
		{Name: "triad", Bytes: 3 * 8 * n},
	}
	steps := []func(){
		func() { copyKernel(s.c, s.a) },
		func() { scaleKernel(s.b, s.c) },
		func() { addKernel(s.c, s.a, s.b) },
		func() { triadKernel(s.a, s.b, s.c) },
	}
	times := make([][]time.Duration, len(kernels))
	start := time.Now()
	for range ntimes {
		for j, step := range steps {
			t0 := time.Now()
			step()
			times[j] = append(times[j], time.Since(t0))
		}
	}
	secs := time.Since(start).Seconds()
	for j := range kernels {
		kernels[j].Min, kernels[j].Avg, kernels[j].Max = stats(times[j][1:])
	}
	if err := s.validate(ntimes); err != nil {
		return Result{}, err
	}
	return Result{Len: len(s.a), NTimes: ntimes, Seconds: secs, Kernels: kernels}, nil
}

func stats(ts []time.Duration) (lo, avg, hi time.Duration) {
	lo, hi = time.Duration(math.MaxInt64), 0
	var sum time.Duration
	for _, t := range ts {
		lo, hi, sum = min(lo, t), max(hi, t), sum+t
	}
	return lo, sum / time.Duration(len(ts)), hi
}

func copyKernel(c, a []float64) {
	c = c[:len(a)]
	for i, v := range a {
		c[i] = v
	}
}

func scaleKernel(b, c []float64) {
	b = b[:len(c)]
	for i, v := range c {
		b[i] = scalar * v
	}
}

func addKernel(c, a, b []float64) {
	b, c = b[:len(a)], c[:len(a)]
	for i, v := range a {
		c[i] = v + b[i]
	}
}

func triadKernel(a, b, c []float64) {
	a, c = a[:len(b)], c[:len(b)]
	for i, v := range b {
		a[i] = v + scalar*c[i]
	}
}

// epsilon is STREAM's tolerance for 8-byte elements: the average relative error of an array.
const epsilon = 1e-13

// validate replays the kernels on scalars and compares the average error of each array, as
// STREAM's checkSTREAMresults does.
func (s *Arrays) validate(ntimes int) error {
	aj, bj, cj := 1.0, 2.0, 0.0
	aj *= 2
	for range ntimes {
		cj = aj
		bj = scalar * cj
		cj = aj + bj
		aj = bj + scalar*cj
	}
	for _, arr := range []struct {
		name string
		x    []float64
		want float64
	}{{"a", s.a, aj}, {"b", s.b, bj}, {"c", s.c, cj}} {
		sumErr := 0.0
		for _, v := range arr.x {
			sumErr += math.Abs(v - arr.want)
		}
		avgErr := sumErr / float64(len(arr.x))
		if rel := avgErr / math.Abs(arr.want); !(rel <= epsilon) {
			return fmt.Errorf("STREAM validation failed: array %s has average relative error %g (limit %g), expected every element to be %g",
				arr.name, rel, epsilon, arr.want)
		}
	}
	return nil
}
