// Command placerscale measures the placer at scale on the local cluster's API server: it adds
// kwok nodes (fake nodes kwok keeps Ready, with the NodeResourceTopology objects a node agent
// would publish, written here since kwok runs no agent), then in one run measures how many pods
// per second the placer and kube-scheduler bind on those nodes — the same pods, the same API
// request limits, each scheduler a process of its own — and how long gangs of pods wait to be
// placed when several compete for the same nodes. It removes every node, object and process it
// made before it exits. It must not touch nodes, pods or objects it did not create; its fake
// nodes are tainted and labelled so that no other pod lands there.
//
// make bench-placer-scale runs it under the local cluster's lock (bench/placerscale/run.sh).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := benchmark(ctx, opts, log)
	if res != nil {
		if werr := writeResults(stdout, opts, res); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		log.Error("placerscale failed", "err", err)
		return 1
	}
	return 0
}
