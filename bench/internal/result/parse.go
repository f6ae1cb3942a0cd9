package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Parse reads one Run written by `fgworker -o json` and validates it.
func Parse(r io.Reader) (Run, error) {
	var run Run
	if err := decodeStrict(r, &run); err != nil {
		return Run{}, fmt.Errorf("read fgworker run: %w", err)
	}
	if err := run.Validate(); err != nil {
		return Run{}, fmt.Errorf("read fgworker run: %w", err)
	}
	return run, nil
}

// ParseProcess reads the result one EP rank writes and validates it.
func ParseProcess(data []byte) (Process, error) {
	var p Process
	if err := decodeStrict(bytes.NewReader(data), &p); err != nil {
		return Process{}, fmt.Errorf("read fgworker process result: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Process{}, fmt.Errorf("read fgworker process result: %w", err)
	}
	return p, nil
}

// decodeStrict decodes exactly one JSON value with no unknown fields, so a document from a
// different fgworker version fails loudly instead of losing fields.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not an fgworker JSON document (is the binary the same version?): %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// Validate checks a Run is complete and consistent.
func (r Run) Validate() error {
	switch {
	case r.Benchmark == BenchDGEMM && r.Unit != UnitGFLOPS, r.Benchmark == BenchSTREAM && r.Unit != UnitGBs:
		return fmt.Errorf("benchmark %q with unit %q: want %s for dgemm, %s for stream", r.Benchmark, r.Unit, UnitGFLOPS, UnitGBs)
	case r.Benchmark != BenchDGEMM && r.Benchmark != BenchSTREAM:
		return fmt.Errorf("unknown benchmark %q: want %q or %q", r.Benchmark, BenchDGEMM, BenchSTREAM)
	case len(r.Processes) == 0:
		return fmt.Errorf("%s run has no processes", r.Benchmark)
	}
	ranks := map[int]bool{}
	for _, p := range r.Processes {
		if err := p.Validate(); err != nil {
			return err
		}
		if ranks[p.Rank] {
			return fmt.Errorf("rank %d appears twice", p.Rank)
		}
		ranks[p.Rank] = true
		if (r.Benchmark == BenchDGEMM) != (p.DGEMM != nil) || (r.Benchmark == BenchSTREAM) != (p.STREAM != nil) {
			return fmt.Errorf("rank %d: details do not match benchmark %q", p.Rank, r.Benchmark)
		}
	}
	if !rate(r.Total.Rate) || !rate(r.Total.BestRate) {
		return fmt.Errorf("total rates %v/%v: want finite, non-negative numbers", r.Total.Rate, r.Total.BestRate)
	}
	if _, err := cpulist.Parse(r.Total.RanOn); err != nil {
		return fmt.Errorf("total CPUs ran on %q: %w", r.Total.RanOn, err)
	}
	return validateCounters("total", r.Total.Counters)
}

// Validate checks one process's result.
func (p Process) Validate() error {
	who := fmt.Sprintf("rank %d (pid %d)", p.Rank, p.PID)
	switch {
	case p.Rank < 0 || p.PID <= 0:
		return fmt.Errorf("%s: rank must be ≥ 0 and pid > 0", who)
	case !rate(p.Rate) || !rate(p.BestRate) || !rate(p.Seconds):
		return fmt.Errorf("%s: rate %v, best %v, seconds %v: want finite, non-negative numbers", who, p.Rate, p.BestRate, p.Seconds)
	case (p.DGEMM == nil) == (p.STREAM == nil):
		return fmt.Errorf("%s: want exactly one of dgemm and stream details", who)
	case p.DGEMM != nil && (p.DGEMM.N <= 0 || p.DGEMM.Reps <= 0 || !(p.DGEMM.Check <= 1)):
		return fmt.Errorf("%s: dgemm n %d, reps %d, check %v: want positive sizes and a passed check (≤ 1)", who, p.DGEMM.N, p.DGEMM.Reps, p.DGEMM.Check)
	case p.STREAM != nil && (p.STREAM.ArrayLen <= 0 || p.STREAM.NTimes < 2 || len(p.STREAM.Kernels) != 4):
		return fmt.Errorf("%s: stream array %d, ntimes %d, %d kernels: want positive sizes, ≥ 2 passes, 4 kernels", who, p.STREAM.ArrayLen, p.STREAM.NTimes, len(p.STREAM.Kernels))
	}
	for _, f := range []struct{ name, value string }{
		{"affinity at init", p.AffinityAtInit}, {"affinity at start", p.AffinityAtStart}, {"CPUs ran on", p.RanOn},
	} {
		if _, err := cpulist.Parse(f.value); err != nil {
			return fmt.Errorf("%s: %s %q: %w", who, f.name, f.value, err)
		}
	}
	for _, t := range p.Threads {
		if _, err := cpulist.Parse(t.RanOn); err != nil {
			return fmt.Errorf("%s: thread %d: CPUs ran on %q: %w", who, t.TID, t.RanOn, err)
		}
	}
	return validateCounters(who, p.Counters)
}

func validateCounters(who string, cs []Counter) error {
	seen := map[string]bool{}
	for _, c := range cs {
		switch {
		case c.Name == "":
			return fmt.Errorf("%s: counter without a name", who)
		case seen[c.Name]:
			return fmt.Errorf("%s: counter %s appears twice", who, c.Name)
		case (c.Value == nil) == (c.Unavailable == ""):
			return fmt.Errorf("%s: counter %s must have either a value or the reason it is unavailable", who, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

func rate(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
