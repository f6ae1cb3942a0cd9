// Command pinning measures EP-DGEMM and EP-STREAM ranks (fgworker) alone, next to a noisy
// neighbour with everything floating, and pinned by finegrain's allocator and cgroup writer —
// coarse, fine and as the kubelet's static policy would — on this machine's real cgroups, and
// reports medians, spread and ratios as a markdown table, JSON rows and PNG plots. Run as root.
// With -on-cluster it runs the same scenarios as pods on the Kubernetes node it runs on (pinned
// by finegrain's node agent or the kubelet's static policy); with -merge it reports the samples
// of earlier runs together.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
	"github.com/finegrain-dev/finegrain/bench/internal/pinning/pods"
)

func main() {
	c, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pinning:", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, log); err != nil {
		log.Error("pinning bench failed", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, log *slog.Logger) error {
	o := c.cluster.Options
	rc := pinning.Context{Command: strings.Join(os.Args, " "), LoadBefore: pinning.LoadAvg(o.ProcRoot), CPUs: runtime.NumCPU()}
	var samples []pinning.Sample
	switch {
	case len(c.merge) > 0:
		var err error
		if samples, rc, err = pinning.Merge(c.merge); err != nil {
			return err
		}
		rc.Command = strings.Join(os.Args, " ")
		rc.Notes = append(rc.Notes, c.notes...)
		o.Repeats = 0
		for _, s := range samples {
			o.Repeats = max(o.Repeats, s.Repeat+1)
		}
		return pinning.Report(samples, o, rc, os.Stdout)
	case c.onCluster:
		m, err := pods.Measure(ctx, c.cluster, log)
		if err != nil {
			return err
		}
		samples, rc.Ranks = m.Samples, m.Ranks
		rc.Entry = "pods; the runtime creates their containers, finegrain's node agent (exclusive, coarse, fine) or the kubelet's static policy " +
			"(kubelet-static) pins them, and each rank waits for its pin before the common start"
		rc.Notes = append([]string{fmt.Sprintf("pods: %s ran on a kubelet with CPU manager policy %s, fgworker from %s",
			strings.Join(m.Scenarios, ", "), m.Policy, c.cluster.Image)}, m.Notes...)
	default:
		entry, err := pinning.EntryMethod(o.Mountinfo)
		if err != nil {
			return err
		}
		rc.Entry = entry
		if samples, err = pinning.Measure(ctx, o, os.Stderr, log); err != nil {
			return err
		}
		rc.Ranks = len(samples[0].Run.Processes)
	}
	if len(samples) == 0 {
		return fmt.Errorf("no scenario could run: %s", strings.Join(rc.Notes, "; "))
	}
	rc.LoadAfter = pinning.LoadAvg(o.ProcRoot)
	rc.Notes = append(rc.Notes, c.notes...)
	return pinning.Report(samples, o, rc, os.Stdout)
}
