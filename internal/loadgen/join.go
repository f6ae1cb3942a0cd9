package loadgen

import (
	"errors"
	"fmt"
	"time"
)

// Join is the report of two runs made one after the other, as if one run: first cut short where
// next began (its trace truncated there), next's trace after it. A load that changes on an event
// rather than at a time fixed in advance runs as two such runs. Both must have kept their samples
// (Options.Record), from which the seconds and the summary are computed again; next must have
// started no earlier than first.
func Join(first, next *Report) (*Report, error) {
	if first.Summary.Requests > len(first.Samples) || next.Summary.Requests > len(next.Samples) {
		return nil, errors.New("join the load reports: both runs must record their samples (Options.Record)")
	}
	gap := next.Start.Sub(first.Start)
	if gap < 0 {
		return nil, fmt.Errorf("join the load reports: the second run started %s before the first", -gap)
	}
	trace := first.Trace.Until(gap)
	// The second run starts when the first has returned: the seconds between the truncated
	// trace's end and it (less than one) are idle.
	if rest := gap - trace.Duration(); rest > 0 {
		trace = append(trace, Step{Duration: rest})
	}
	trace = append(trace, next.Trace...)
	rec := newRecorder(trace, first.Start, true)
	for _, s := range first.Samples {
		rec.add(s)
	}
	for _, s := range next.Samples {
		s.Scheduled, s.Sent, s.Done = s.Scheduled+gap, s.Sent+gap, s.Done+gap
		rec.add(s)
	}
	return rec.report(gap + time.Duration(next.Summary.DurationSeconds*float64(time.Second))), nil
}

// Until is the trace cut at d: its steps up to d, the one running at d shortened to end there.
func (t Trace) Until(d time.Duration) Trace {
	var out Trace
	for _, s := range t {
		if d <= 0 {
			break
		}
		s.Duration = min(s.Duration, d)
		out = append(out, s)
		d -= s.Duration
	}
	return out
}
