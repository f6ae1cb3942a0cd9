// Command fgworker runs EP-DGEMM or EP-STREAM over N processes of itself and prints each
// process's rate, perf counters, context switches and the CPUs it ran on; `fgworker noise` is
// a CPU and memory-bandwidth hog for interference experiments. Build it static with
// CGO_ENABLED=0 (gonum BLAS) or with -tags openblas against libopenblas.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/worker"
)

const usage = `usage: fgworker dgemm|stream|noise [flags]

  dgemm   EP-DGEMM: each process multiplies n×n matrices single-threaded for -duration
  stream  EP-STREAM: each process runs copy/scale/add/triad over arrays beyond the caches
  noise   noisy neighbour: -threads threads stream over -mem-mib MiB until -duration ends
          (default: until SIGTERM)

In a pod: -o log writes the result as one line "fgworker-result {json}" (noise: its running
totals every -report too); -await-cpus N waits until each rank is pinned to N CPUs and
-start-at T releases the ranks at time T, so that ranks in separate pods time together.

flags:
`

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	o, verbose, err := parse(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fgworker:", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.Child {
		log = log.With("rank", o.Rank, "pid", os.Getpid())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := worker.Main(ctx, o, os.Stdin, os.Stdout, os.Stderr, log); err != nil {
		log.Error("fgworker failed", "mode", o.Mode, "err", err)
		stop()
		os.Exit(1)
	}
}

func parse(mode string, args []string) (worker.Options, bool, error) {
	o := worker.Options{Mode: mode}
	fs := flag.NewFlagSet("fgworker "+mode, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	fs.IntVar(&o.Procs, "np", 1, "processes (ranks) to run together")
	fs.StringVar(&o.Output, "o", worker.OutputTable, "output: table, json or log (one result line for container logs)")
	fs.IntVar(&o.N, "n", 2048, "dgemm: matrix order")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "dgemm: time each process multiplies at least; noise: run time (0: until stopped)")
	fs.IntVar(&o.MinReps, "reps", 1, "dgemm: products each process does at least")
	fs.IntVar(&o.ArrayLen, "array", 0, "stream: elements per array (0: four times the last-level caches)")
	fs.IntVar(&o.NTimes, "ntimes", 20, "stream: passes; the best of all but the first is reported")
	fs.IntVar(&o.NoiseThreads, "threads", runtime.NumCPU(), "noise: threads")
	mem := fs.Int64("mem-mib", 512, "noise: MiB the threads stream over together")
	fs.DurationVar(&o.Report, "report", time.Second, "noise with -o log: how often it writes its running totals (0: only at the end)")
	fs.IntVar(&o.AwaitCPUs, "await-cpus", 0, "dgemm, stream: before the ranks start, wait until each may run on exactly this many CPUs (0: do not wait)")
	startAt := fs.String("start-at", "", "dgemm, stream: release the ranks at this RFC 3339 time (default: as soon as they are ready)")
	fs.StringVar(&o.SysfsRoot, "sysfs", "/sys", "sysfs root, for cache sizes")
	fs.StringVar(&o.ProcRoot, "proc", "/proc", "procfs root, for thread statistics")
	fs.DurationVar(&o.SampleInterval, "sample", 50*time.Millisecond, "how often thread placement is sampled")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long the ranks may take to set up")
	fs.BoolVar(&o.Child, "child", false, "internal: run as one rank of an EP run (handshake on stdin/stdout)")
	fs.IntVar(&o.Rank, "rank", 0, "internal: rank of this process")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return o, false, err
	}
	if fs.NArg() > 0 {
		return o, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, *startAt)
		if err != nil {
			return o, false, fmt.Errorf("-start-at %q: want an RFC 3339 time such as 2026-01-02T15:04:05.5Z: %w", *startAt, err)
		}
		o.StartAt = t
	}
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if mode == worker.ModeNoise && !durationSet {
		o.Duration = 0
	}
	o.NoiseBytes = *mem << 20
	return o, *verbose, nil
}
