package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/threads"
)

// NoiseResult is what the noisy neighbour did.
type NoiseResult struct {
	Threads int     `json:"threads"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// GBs is the memory traffic it generated, read plus write, in 10⁹ bytes per second.
	GBs float64 `json:"GBs"`
	// Affinity is the set of CPUs it could run on when it reported (its cgroup's cpuset).
	Affinity string `json:"affinity,omitempty"`
}

// RunNoise is the noisy neighbour: o.NoiseThreads threads each read and write their share of
// o.NoiseBytes over and over, using a CPU each and as much memory bandwidth as they get, until
// o.Duration passes (when set) or ctx ends. With log output it also writes its running totals
// every o.Report, so that a reader of its container log sees what it did without stopping it.
func RunNoise(ctx context.Context, o Options, stdout io.Writer, log *slog.Logger) error {
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	runtime.GOMAXPROCS(o.NoiseThreads)
	per := max(o.NoiseBytes/int64(o.NoiseThreads)/8, 1)
	var stop atomic.Bool
	var passes atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range o.NoiseThreads {
		buf := make([]float64, per)
		wg.Go(func() {
			runtime.LockOSThread()
			for !stop.Load() {
				for i := range buf {
					buf[i] = buf[i]*0.999 + 1
				}
				passes.Add(1)
			}
		})
	}
	log.Info("noise running", "threads", o.NoiseThreads, "bytes", per*8*int64(o.NoiseThreads))
	bytes := per * 8 * int64(o.NoiseThreads)
	totals := func() NoiseResult {
		secs := time.Since(start).Seconds()
		r := NoiseResult{Threads: o.NoiseThreads, Bytes: bytes, Seconds: secs, GBs: float64(2*8*per*passes.Load()) / secs / 1e9}
		if set, err := threads.Affinity(0); err == nil {
			r.Affinity = set.String()
		}
		return r
	}
	var tick <-chan time.Time
	if o.Output == OutputLog && o.Report > 0 {
		t := time.NewTicker(o.Report)
		defer t.Stop()
		tick = t.C
	}
	for running := true; running; {
		select {
		case <-tick:
			if err := writeLogLine(stdout, totals()); err != nil {
				stop.Store(true)
				wg.Wait()
				return err
			}
		case <-ctx.Done():
			running = false
		}
	}
	stop.Store(true)
	wg.Wait()
	r := totals()
	switch o.Output {
	case OutputJSON:
		return json.NewEncoder(stdout).Encode(r)
	case OutputLog:
		return writeLogLine(stdout, r)
	}
	_, err := fmt.Fprintf(stdout, "noise: %d threads over %d MiB for %.1f s, %.2f GB/s of memory traffic\n",
		r.Threads, r.Bytes>>20, r.Seconds, r.GBs)
	return err
}
