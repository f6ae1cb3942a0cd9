package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/finegrain-dev/finegrain/bench/internal/dgemm"
	"github.com/finegrain-dev/finegrain/bench/internal/ep"
	"github.com/finegrain-dev/finegrain/bench/internal/perf"
	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/stream"
	"github.com/finegrain-dev/finegrain/bench/internal/threads"
)

// benchmark is one prepared kernel: run times it and fills the rate fields of a Process.
type benchmark interface {
	run(p *result.Process) error
}

// RunChild is one rank: set up, report ready on stdout, wait for go on stdin, time the
// benchmark with counters and thread sampling, and write the Process as JSON on stdout.
func RunChild(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	bench, err := prepare(o)
	if err != nil {
		return err
	}
	pid := os.Getpid()
	counters, err := perf.Open(perf.Kernel{}, perf.DefaultEvents(), perf.TaskLister(o.ProcRoot, pid))
	if err != nil {
		return err
	}
	defer counters.Close()
	sampler, err := threads.NewSampler(o.ProcRoot, pid)
	if err != nil {
		return err
	}
	if err := ep.Ready(stdout, stdin); err != nil {
		return err
	}

	p := result.Process{Rank: o.Rank, PID: pid}
	atInit, err := threads.InitAffinity()
	if err != nil {
		return err
	}
	atStart, err := threads.Affinity(pid)
	if err != nil {
		return err
	}
	p.AffinityAtInit, p.AffinityAtStart = atInit.String(), atStart.String()

	if err := sampler.Start(); err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sampleErr error
	wg.Go(func() { sampleErr = sampler.Run(sctx, o.SampleInterval) })
	if err := counters.Enable(); err != nil {
		stop()
		wg.Wait()
		return err
	}
	runErr := bench.run(&p)
	disableErr := counters.Disable()
	stop()
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	if disableErr != nil {
		return disableErr
	}
	if sampleErr != nil {
		return sampleErr
	}
	values, err := counters.Read()
	if err != nil {
		return err
	}
	p.Counters = convertCounters(values)
	ts := sampler.Threads()
	vol, invol, ranOn := threads.Totals(ts)
	p.VoluntarySwitches, p.InvoluntarySwitches, p.RanOn = vol, invol, ranOn.String()
	p.Threads = convertThreads(ts)
	log.Debug("rank finished", "rank", o.Rank, "pid", pid, "rate", p.Rate, "ranOn", p.RanOn)
	if err := json.NewEncoder(stdout).Encode(p); err != nil {
		return fmt.Errorf("write result of rank %d: %w", o.Rank, err)
	}
	return nil
}

func prepare(o Options) (benchmark, error) {
	switch o.Mode {
	case ModeDGEMM:
		p, err := dgemm.Prepare(dgemm.NewBackend(), o.N)
		if err != nil {
			return nil, err
		}
		return dgemmBench{p: p, o: o}, nil
	case ModeSTREAM:
		n := o.ArrayLen
		if n == 0 {
			var err error
			if n, err = stream.DefaultLen(o.SysfsRoot); err != nil {
				return nil, err
			}
		}
		a, err := stream.Prepare(n)
		if err != nil {
			return nil, err
		}
		return streamBench{a: a, ntimes: o.NTimes}, nil
	}
	return nil, fmt.Errorf("mode %q has no benchmark to time", o.Mode)
}

type dgemmBench struct {
	p *dgemm.Problem
	o Options
}

func (b dgemmBench) run(p *result.Process) error {
	r, err := b.p.Run(b.o.Duration, b.o.MinReps)
	if err != nil {
		return err
	}
	p.Rate, p.BestRate, p.Seconds = r.GFLOPS, r.BestGFLOPS, r.Seconds
	p.DGEMM = &result.DGEMMStats{N: r.N, Reps: r.Reps, Check: r.Check, Backend: dgemm.BackendName()}
	return nil
}

type streamBench struct {
	a      *stream.Arrays
	ntimes int
}

func (b streamBench) run(p *result.Process) error {
	r, err := b.a.Run(b.ntimes)
	if err != nil {
		return err
	}
	triad := r.Triad()
	p.Rate, p.BestRate, p.Seconds = triad.AvgGBs(), triad.BestGBs(), r.Seconds
	p.STREAM = &result.STREAMStats{ArrayLen: r.Len, NTimes: r.NTimes}
	for _, k := range r.Kernels {
		p.STREAM.Kernels = append(p.STREAM.Kernels, result.Kernel{
			Name: k.Name, BestGBs: k.BestGBs(), AvgGBs: k.AvgGBs(),
			MinSeconds: k.Min.Seconds(), AvgSeconds: k.Avg.Seconds(), MaxSeconds: k.Max.Seconds(),
		})
	}
	return nil
}

func convertCounters(vs []perf.Value) []result.Counter {
	out := make([]result.Counter, 0, len(vs))
	for _, v := range vs {
		c := result.Counter{Name: v.Event.Name, Unit: v.Event.Unit, Scaled: v.Scaled}
		if v.Unavailable != nil {
			c.Unavailable = v.Unavailable.Error()
		} else {
			count := v.Count
			c.Value = &count
		}
		out = append(out, c)
	}
	return out
}

func convertThreads(ts []threads.Thread) []result.Thread {
	out := make([]result.Thread, 0, len(ts))
	for _, t := range ts {
		out = append(out, result.Thread{TID: t.TID, Comm: t.Comm, Voluntary: t.Voluntary, Involuntary: t.Involuntary,
			RanOn: t.RanOn.String(), Exited: t.Exited})
	}
	return out
}
