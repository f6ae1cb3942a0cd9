package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// options are the command's flags.
type options struct {
	kubeconfig                  string
	kwok, kubeScheduler, placer string
	// placerFlags are extra flags for the placer under test, for experiments.
	placerFlags                  []string
	outDir                       string
	nodes, numaPerNode, cpusNUMA int
	// kwokPods has kwok run the bound pods (a status write each) as well as the nodes.
	kwokPods bool
	// pods is how many pods one throughput round binds; rounds how many rounds each scheduler
	// runs (in the order placer, kube-scheduler, kube-scheduler, placer, ...).
	pods, rounds int
	// jobRounds is how many job rounds each scheduler runs (same alternation).
	jobRounds int
	qps       float64
	burst     int
	// gangs compete for gangNodes nodes; each is gangPods pods of gangCPUs exclusive CPUs, and
	// is deleted gangHold after it is bound, making room for the next.
	gangs, gangNodes, gangPods, gangCPUs int
	gangHold                             time.Duration
	// profile names a file for a CPU profile of the placer over its first throughput round.
	profile string
	timeout time.Duration
	json    bool
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("placerscale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default $KUBECONFIG)")
	fs.StringVar(&o.kwok, "kwok", "", "kwok binary (sigs.k8s.io/kwok/cmd/kwok v0.7.0)")
	fs.StringVar(&o.kubeScheduler, "kube-scheduler", "", "kube-scheduler binary")
	fs.StringVar(&o.placer, "placer", "", "placer binary (built from this tree)")
	fs.Func("placer-flag", "an extra flag for the placer under test, e.g. -placer-flag=--parallelism=128 (repeatable)", func(v string) error {
		o.placerFlags = append(o.placerFlags, v)
		return nil
	})
	fs.StringVar(&o.outDir, "out", "_output/placerscale", "directory for the processes' logs, configs, profile and results.json")
	fs.IntVar(&o.nodes, "nodes", 1000, "kwok nodes to add")
	fs.IntVar(&o.numaPerNode, "numa", 2, "NUMA nodes per kwok node")
	fs.IntVar(&o.cpusNUMA, "cpus-per-numa", 32, "CPUs per NUMA node")
	fs.BoolVar(&o.kwokPods, "kwok-pods", true, "kwok runs the bound pods too (each becomes Running, a status write per pod, as a kubelet's); false: kwok only keeps the nodes Ready")
	fs.IntVar(&o.pods, "pods", 3000, "pods per throughput round")
	fs.IntVar(&o.rounds, "rounds", 2, "throughput rounds per scheduler, alternating (0: skip)")
	fs.IntVar(&o.jobRounds, "job-rounds", 2, "job rounds per scheduler: a job of -pods one-CPU workers submitted until all are bound (an HPCJob for the placer, pods made by the benchmark for kube-scheduler; 0: skip)")
	fs.Float64Var(&o.qps, "qps", 500, "API requests per second allowed to each scheduler (kube-scheduler's clientConnection.qps, the placer's --kube-api-qps)")
	fs.IntVar(&o.burst, "burst", 1000, "API request burst of each scheduler")
	fs.IntVar(&o.gangs, "gangs", 16, "competing pod gangs (0: skip)")
	fs.IntVar(&o.gangNodes, "gang-nodes", 100, "kwok nodes the gangs compete for")
	fs.IntVar(&o.gangPods, "gang-pods", 50, "pods per gang")
	fs.IntVar(&o.gangCPUs, "gang-cpus", 15, "exclusive CPUs per gang pod")
	fs.DurationVar(&o.gangHold, "gang-hold", 2*time.Second, "how long a bound gang runs before it is deleted")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of the placer's first throughput round to this file (relative to -out)")
	fs.DurationVar(&o.timeout, "phase-timeout", 10*time.Minute, "longest wait for one round or the gang phase")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("placerscale takes no arguments, got %q", fs.Args())
	}
	var errs []error
	for _, b := range []struct{ flag, path string }{{"-kwok", o.kwok}, {"-kube-scheduler", o.kubeScheduler}, {"-placer", o.placer}, {"-kubeconfig", o.kubeconfig}} {
		if b.path == "" {
			errs = append(errs, fmt.Errorf("%s is required", b.flag))
		} else if _, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", b.flag, b.path, err))
		}
	}
	switch {
	case o.nodes < 1 || o.nodes > 9999:
		errs = append(errs, fmt.Errorf("-nodes %d: want 1 to 9999", o.nodes))
	case o.numaPerNode < 1 || o.cpusNUMA < 2:
		errs = append(errs, fmt.Errorf("-numa %d -cpus-per-numa %d: want at least 1 NUMA node of 2 CPUs", o.numaPerNode, o.cpusNUMA))
	case o.pods < 1 || o.rounds < 0 || o.jobRounds < 0 || o.qps <= 0 || o.burst < 1:
		errs = append(errs, fmt.Errorf("-pods %d -rounds %d -job-rounds %d -qps %v -burst %d: want positive values (rounds may be 0)", o.pods, o.rounds, o.jobRounds, o.qps, o.burst))
	case o.gangs < 0 || (o.gangs > 0 && (o.gangNodes < 1 || o.gangNodes > o.nodes || o.gangPods < 1 || o.gangCPUs < 1 || o.gangCPUs > o.cpusNUMA)):
		errs = append(errs, fmt.Errorf("-gangs %d -gang-nodes %d -gang-pods %d -gang-cpus %d: want gang nodes within -nodes and gang CPUs within one NUMA node",
			o.gangs, o.gangNodes, o.gangPods, o.gangCPUs))
	}
	return o, errors.Join(errs...)
}
