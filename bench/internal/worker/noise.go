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
)

// NoiseResult is what the noisy neighbour did.
type NoiseResult struct {
	Threads int     `json:"threads"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// GBs is the memory traffic it generated, read plus write, in 10⁹ bytes per second.
	GBs float64 `json:"GBs"`
}

// RunNoise is the noisy neighbour: o.NoiseThreads threads each read and write their share of
// o.NoiseBytes over and over, using a CPU each and as much memory bandwidth as they get, until
// o.Duration passes (when set) or ctx ends.
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
	<-ctx.Done()
	stop.Store(true)
	wg.Wait()
	secs := time.Since(start).Seconds()
	r := NoiseResult{Threads: o.NoiseThreads, Bytes: per * 8 * int64(o.NoiseThreads), Seconds: secs,
		GBs: float64(2*8*per*passes.Load()) / secs / 1e9}
	if o.Output == OutputJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	_, err := fmt.Fprintf(stdout, "noise: %d threads over %d MiB for %.1f s, %.2f GB/s of memory traffic\n",
		r.Threads, r.Bytes>>20, r.Seconds, r.GBs)
	return err
}
