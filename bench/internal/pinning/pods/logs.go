package pods

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/worker"
)

// maxResultLine bounds one result line of a container log: a rank's result with its threads
// is a few kilobytes.
const maxResultLine = 16 << 20

// parseRunLog reads the result of a worker pod from its container log: exactly one result line,
// a valid fgworker run.
func parseRunLog(log []byte) (result.Run, error) {
	lines, err := worker.ResultLines(log, maxResultLine)
	if err != nil {
		return result.Run{}, err
	}
	switch len(lines) {
	case 0:
		return result.Run{}, fmt.Errorf("no %q line in the log (it ends: %s)", strings.TrimSpace(worker.LogPrefix), tail(log))
	case 1:
	default:
		return result.Run{}, fmt.Errorf("%d result lines in the log, want one: the container ran twice or the log is mixed", len(lines))
	}
	return result.Parse(bytes.NewReader(lines[0]))
}

// parseNoiseLog reads the neighbour's latest running totals from its container log.
func parseNoiseLog(log []byte) (worker.NoiseResult, error) {
	lines, err := worker.ResultLines(log, maxResultLine)
	if err != nil {
		return worker.NoiseResult{}, err
	}
	if len(lines) == 0 {
		return worker.NoiseResult{}, fmt.Errorf("no %q line in the neighbour's log yet (it ends: %s)", strings.TrimSpace(worker.LogPrefix), tail(log))
	}
	var r worker.NoiseResult
	dec := json.NewDecoder(bytes.NewReader(lines[len(lines)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return worker.NoiseResult{}, fmt.Errorf("neighbour totals %q: %w", lines[len(lines)-1], err)
	}
	if r.Threads < 1 || r.Seconds <= 0 || r.GBs < 0 || r.Bytes < 1 {
		return worker.NoiseResult{}, errors.New("neighbour totals with no threads, time or traffic: " + string(lines[len(lines)-1]))
	}
	return r, nil
}

// tail returns the last few hundred bytes of a log for an error message.
func tail(log []byte) string {
	const n = 400
	s := strings.TrimSpace(string(log))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
