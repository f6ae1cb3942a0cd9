// Package loadgen drives a service at a fixed-rate, open-loop schedule and records what it saw
// without coordinated omission: every request has a scheduled send time fixed in advance by the
// load trace (rate over time), is sent at that time whether or not earlier requests have
// answered, and its latency runs from the scheduled time — so a stall of the service, or of the
// generator itself, counts against every request that should have been sent during it, not
// only against the one that was waiting. It owns the trace (steps of rate over time, from a flag
// or a file), the schedule, the run and its report (per second: offered and achieved rate,
// p50/p99/max latency, errors; and a summary). It must not decide anything about the service.
package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxRate bounds a step's rate (requests per second); MaxDuration a trace's length.
const (
	MaxRate     = 1_000_000
	MaxDuration = 24 * time.Hour
)

// Step is a stretch of the trace at one rate.
type Step struct {
	// Duration of the step.
	Duration time.Duration
	// Rate in requests per second (0 is a pause).
	Rate float64
}

// MarshalJSON writes {"duration":"30s","rate":100}.
func (s Step) MarshalJSON() ([]byte, error) {
	return json.Marshal(stepJSON{Duration: s.Duration.String(), Rate: s.Rate})
}

// UnmarshalJSON reads {"duration":"30s","rate":100}.
func (s *Step) UnmarshalJSON(b []byte) error {
	var j stepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d, err := time.ParseDuration(j.Duration)
	if err != nil {
		return fmt.Errorf("step duration %q: %w", j.Duration, err)
	}
	*s = Step{Duration: d, Rate: j.Rate}
	return nil
}

type stepJSON struct {
	Duration string  `json:"duration"`
	Rate     float64 `json:"rate"`
}

// Trace is the load over time: its steps, one after the other.
type Trace []Step

// Duration is the trace's length.
func (t Trace) Duration() time.Duration {
	var d time.Duration
	for _, s := range t {
		d += s.Duration
	}
	return d
}

// Validate checks every step and the total length.
func (t Trace) Validate() error {
	if len(t) == 0 {
		return errors.New("load trace is empty: give at least one step, e.g. 60s@100")
	}
	var total time.Duration
	for i, s := range t {
		switch {
		case s.Duration <= 0:
			return fmt.Errorf("step %d: duration %s: want more than 0", i+1, s.Duration)
		case math.IsNaN(s.Rate) || s.Rate < 0 || s.Rate > MaxRate:
			return fmt.Errorf("step %d: rate %g requests/s: want 0 to %d", i+1, s.Rate, MaxRate)
		}
		total += s.Duration
		if total > MaxDuration {
			return fmt.Errorf("load trace longer than %s", MaxDuration)
		}
	}
	return nil
}

// ParseTrace reads the flag form: comma-separated steps DURATION@RATE ("60s@100,2m@400"; the
// rate in requests per second).
func ParseTrace(s string) (Trace, error) {
	var t Trace
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		ds, rs, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("load step %q: want DURATION@RATE, e.g. 60s@100", part)
		}
		step, err := parseStep(ds, rs)
		if err != nil {
			return nil, fmt.Errorf("load step %q: %w", part, err)
		}
		t = append(t, step)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

func parseStep(ds, rs string) (Step, error) {
	d, err := time.ParseDuration(strings.TrimSpace(ds))
	if err != nil {
		return Step{}, fmt.Errorf("duration: %w", err)
	}
	r, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
	if err != nil {
		return Step{}, fmt.Errorf("rate %q: want requests per second", rs)
	}
	return Step{Duration: d, Rate: r}, nil
}

// ReadTrace reads a trace file: a JSON array of {"duration":"30s","rate":100}, or lines
// "DURATION RATE" ('#' starts a comment).
func ReadTrace(r io.Reader) (Trace, error) {
	br := bufio.NewReader(io.LimitReader(r, 1<<20))
	data, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("read load trace: %w", err)
	}
	var t Trace
	if strings.HasPrefix(strings.TrimSpace(string(data)), "[") {
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, fmt.Errorf("load trace (JSON): %w", err)
		}
	} else {
		for i, line := range strings.Split(string(data), "\n") {
			line, _, _ = strings.Cut(line, "#")
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if len(f) != 2 {
				return nil, fmt.Errorf("load trace line %d %q: want DURATION RATE", i+1, strings.TrimSpace(line))
			}
			step, err := parseStep(f[0], f[1])
			if err != nil {
				return nil, fmt.Errorf("load trace line %d: %w", i+1, err)
			}
			t = append(t, step)
		}
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Schedule returns the send times of the trace's requests as offsets from the start, in order:
// within a step of rate r, one every 1/r seconds from the step's start (the first at the
// start). It is computed as it goes, so a long trace costs no memory.
func (t Trace) Schedule() *Schedule { return &Schedule{trace: t} }

// Schedule walks a trace's send times (Trace.Schedule).
type Schedule struct {
	trace Trace
	step  int
	k     int
	base  time.Duration
}

// Next returns the next send time, or false after the last.
func (s *Schedule) Next() (time.Duration, bool) {
	for s.step < len(s.trace) {
		st := s.trace[s.step]
		n := int(math.Floor(st.Duration.Seconds()*st.Rate + 1e-9))
		if s.k < n {
			at := s.base + time.Duration(float64(s.k)*float64(time.Second)/st.Rate)
			s.k++
			return at, true
		}
		s.base += st.Duration
		s.step++
		s.k = 0
	}
	return 0, false
}

// RateAt is the trace's rate at offset d (0 past its end).
func (t Trace) RateAt(d time.Duration) float64 {
	var at time.Duration
	for _, s := range t {
		if d >= at && d < at+s.Duration {
			return s.Rate
		}
		at += s.Duration
	}
	return 0
}
