// Command pinning measures EP-DGEMM and EP-STREAM ranks (fgworker) alone, next to a noisy
// neighbour with everything floating, and pinned by finegrain's allocator and cgroup writer —
// coarse, fine and as the kubelet's static policy would — on this machine's real cgroups, and
// reports medians, spread and ratios as a markdown table, JSON rows and PNG plots. Run as root.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
)

func main() {
	o, verbose, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pinning:", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("pinning bench failed", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o pinning.Options, log *slog.Logger) error {
	rc := pinning.Context{Command: strings.Join(os.Args, " "), LoadBefore: pinning.LoadAvg(o.ProcRoot), CPUs: runtime.NumCPU()}
	entry, err := pinning.EntryMethod(o.Mountinfo)
	if err != nil {
		return err
	}
	rc.Entry = entry
	samples, err := pinning.Measure(ctx, o, os.Stderr, log)
	if err != nil {
		return err
	}
	rc.LoadAfter = pinning.LoadAvg(o.ProcRoot)
	rc.Ranks = len(samples[0].Run.Processes)
	return pinning.Report(samples, o, rc, os.Stdout)
}

func parse(args []string) (pinning.Options, bool, error) {
	var o pinning.Options
	fs := flag.NewFlagSet("pinning", flag.ContinueOnError)
	fs.StringVar(&o.Worker, "worker", "bin/fgworker", "fgworker binary for the ranks and the neighbour")
	scenarios := fs.String("scenarios", strings.Join(pinning.AllScenarios, ","), "comma-separated scenarios (alone is required)")
	benchmarks := fs.String("benchmarks", strings.Join(pinning.AllBenchmarks, ","), "comma-separated benchmarks")
	fs.IntVar(&o.Repeats, "repeats", 5, "runs of every scenario and benchmark")
	fs.IntVar(&o.Ranks, "ranks", 0, "ranks per scenario (0: cores of the first NUMA node less one)")
	fs.IntVar(&o.N, "n", 2048, "DGEMM matrix order")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "DGEMM time per run")
	fs.IntVar(&o.ArrayLen, "array", 0, "STREAM elements per array (0: four times the last-level caches)")
	fs.IntVar(&o.NTimes, "ntimes", 20, "STREAM passes per run")
	fs.IntVar(&o.NoiseThreads, "noise-threads", runtime.NumCPU(), "neighbour threads")
	fs.IntVar(&o.NoiseMiB, "noise-mib", 512, "MiB the neighbour streams over")
	fs.Float64Var(&o.NoiseCPUs, "noise-cpus", 1, "the neighbour's CPU limit, enforced as a CFS quota in every scenario (0: none)")
	fs.DurationVar(&o.NoiseWarmup, "noise-warmup", time.Second, "how long the neighbour runs before the ranks start")
	fs.StringVar(&o.SysfsRoot, "sysfs", "/sys", "sysfs root")
	fs.StringVar(&o.ProcRoot, "proc", "/proc", "procfs root")
	fs.StringVar(&o.Mountinfo, "mountinfo", "/proc/self/mountinfo", "mount table to find the cgroup hierarchies in")
	fs.StringVar(&o.OutDir, "out", "_output/pinning", "directory for pinning.md, pinning.json, samples.json and the plots")
	fs.StringVar(&o.Output, "o", "table", "stdout: table (markdown) or json (rows)")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return o, false, err
	}
	if fs.NArg() > 0 {
		return o, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Scenarios, o.Benchmarks = split(*scenarios), split(*benchmarks)
	return o, *verbose, o.Validate()
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
