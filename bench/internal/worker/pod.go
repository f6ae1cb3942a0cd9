package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/ep"
	"github.com/finegrain-dev/finegrain/bench/internal/threads"
)

// LogPrefix starts the line that carries a result in log output (-o log): a container log mixes
// the result on stdout with the messages on stderr, and the prefix tells them apart.
const LogPrefix = "fgworker-result "

// awaitPoll is how often the ranks' affinity is read while waiting for their pin.
const awaitPoll = 5 * time.Millisecond

// writeLogLine writes v as one result line of log output.
func writeLogLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", LogPrefix, b)
	return err
}

// ResultLines returns the JSON documents of the result lines in a log, in order. Lines longer
// than max bytes are an error, not silently cut.
func ResultLines(log []byte, max int) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, min(64<<10, max)), max)
	for sc.Scan() {
		if doc, ok := bytes.CutPrefix(sc.Bytes(), []byte(LogPrefix)); ok {
			out = append(out, bytes.Clone(doc))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read fgworker log: %w", err)
	}
	return out, nil
}

// releaseWhenPlaced is the Placer of an EP run in a pod: it waits until every rank may run on
// exactly o.AwaitCPUs CPUs (when set), then until o.StartAt (when set).
func releaseWhenPlaced(ctx context.Context, o Options, log *slog.Logger) Placer {
	return func(procs []*ep.Proc) error {
		if o.AwaitCPUs > 0 {
			deadline := time.Now().Add(o.ReadyTimeout)
			if !o.StartAt.IsZero() {
				deadline = o.StartAt
			}
			if err := awaitCPUs(ctx, procs, o.AwaitCPUs, deadline); err != nil {
				return err
			}
		}
		if o.StartAt.IsZero() {
			return nil
		}
		wait := time.Until(o.StartAt)
		if wait < 0 {
			return fmt.Errorf("ranks ready %v after the start time %s: this run would not overlap the others; give the pods more time to start (bench/pinning -start-lead)",
				-wait.Round(time.Millisecond), o.StartAt.Format(time.RFC3339Nano))
		}
		log.Debug("ranks ready, waiting for the start time", "wait", wait, "startAt", o.StartAt)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitCPUs polls the affinity of every rank until each may run on exactly n CPUs.
func awaitCPUs(ctx context.Context, procs []*ep.Proc, n int, deadline time.Time) error {
	start := time.Now()
	for _, p := range procs {
		for {
			set, err := threads.Affinity(p.PID)
			if err != nil {
				return fmt.Errorf("rank %d: %w", p.Rank, err)
			}
			if set.Size() == n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d (pid %d) may still run on CPUs %s after %v, not on %d CPUs: its container was not pinned in time (does a node agent or the kubelet's static policy pin it?)",
					p.Rank, p.PID, set, time.Since(start).Round(time.Millisecond), n)
			}
			select {
			case <-time.After(awaitPoll):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
