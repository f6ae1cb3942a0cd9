package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

// options are the simulator's flags.
type options struct {
	trace       string
	nodes       []int
	jobsPerNode int
	jobs        int
	seed        uint64
	seeds       int
	load        float64
	batch       bool
	mix         [3]float64
	machine     string
	model       string
	strategies  []string
	baseline    string
	output      string
	writeTrace  string
	printModel  bool
	verify      bool
	reserved    int
	parallel    int
	command     string
	// experiment picks one of the papers' experiments instead of the workload replay.
	experiment    string
	submissionGap time.Duration
	rescaleGap    time.Duration
	slotsPerNode  int
	plotDir       string
	workload      string
	// shrinkEqualPriority is the elastic experiment's newJob rule: false shrinks only jobs of
	// strictly lower priority, as the placer does.
	shrinkEqualPriority bool
	// priorityByType draws the elastic experiment's priorities by job type, as the paper's
	// authors' simulator does.
	priorityByType bool
	// set holds the flags the command line gave.
	set map[string]bool
}

// defaultMachine is the fine-grained scheduling paper's node: 2 × Xeon E5-2697 v4.
var defaultMachine = filepath.Join("pkg", "topology", "testdata", "xeon-e5-2697v4-2s", "sys")

func parseOptions(args []string, stderr io.Writer) (options, error) {
	o := options{command: strings.Join(append([]string{"go run ./bench/simulator"}, args...), " ")}
	fs := flag.NewFlagSet("simulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "4,16", "cluster sizes to simulate, comma-separated")
	mix := fs.String("mix", "1,1,1", "generator: weights of cpu, memory and network jobs")
	strategies := fs.String("strategies", "all", "strategies to compare, comma-separated (all: every one)")
	fs.StringVar(&o.trace, "trace", "", "workload trace (.yaml, .json or .csv); without it jobs are generated")
	fs.IntVar(&o.jobsPerNode, "jobs-per-node", 25, "generator: jobs per node of each cluster size")
	fs.IntVar(&o.jobs, "jobs", 0, "generator: jobs per scenario (overrides -jobs-per-node when set)")
	fs.Uint64Var(&o.seed, "seed", 1, "generator: random seed")
	fs.IntVar(&o.seeds, "seeds", 1, "generator: workloads per cluster size, seeds -seed, -seed+1, …; more than one adds an across-seeds summary")
	fs.Float64Var(&o.load, "load", 0.5, "generator: offered load (arrival rate × mean CPU-seconds per job / cluster CPUs)")
	fs.BoolVar(&o.batch, "batch", false, "generator: submit every job at time 0 instead of Poisson arrivals at -load")
	fs.StringVar(&o.machine, "machine", defaultMachine, "node type: a sysfs tree, or synthetic:SOCKETSxNUMAxL3xCORESxTHREADS[:GiB]")
	fs.StringVar(&o.model, "model", "", "runtime model file (YAML; -print-model writes the defaults)")
	fs.StringVar(&o.baseline, "baseline", sim.StrategyKube, "strategy the ratios compare with")
	fs.StringVar(&o.output, "o", "table", "output: table (markdown) or json")
	fs.StringVar(&o.writeTrace, "write-trace", "", "also write the generated workload of each scenario to FILE (nodes count appended when several)")
	fs.BoolVar(&o.printModel, "print-model", false, "print the runtime model (defaults, or -model's) as YAML and exit")
	fs.IntVar(&o.reserved, "system-reserved", 1, "CPUs the kubelet reserves for system daemons on every node (--system-reserved=cpu)")
	fs.BoolVar(&o.verify, "verify", false, "check every allocator's invariants after every event (slower)")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	fs.StringVar(&o.experiment, "experiment", "", "run one of the papers' experiments instead of the workload replay: elastic, finegrained-1, finegrained-2, genisys (docs/experiments.md)")
	fs.DurationVar(&o.submissionGap, "submission-gap", 90*time.Second, "elastic: time between two jobs' submissions of a generated job set")
	fs.DurationVar(&o.rescaleGap, "rescale-gap", 60*time.Second, "elastic: least time between two rescales of one job")
	fs.IntVar(&o.slotsPerNode, "slots-per-node", 16, "elastic: replica slots per node")
	fs.StringVar(&o.plotDir, "plot", "", "elastic, genisys: write the experiment's PNG charts into this directory")
	fs.BoolVar(&o.priorityByType, "priority-by-type", false, "elastic: draw priorities by job type (small 4-5, medium 3-4, large 2-3, xlarge 1-2), as the paper's authors' simulator does, instead of uniformly from 1-5")
	fs.BoolVar(&o.shrinkEqualPriority, "shrink-equal-priority", true, "elastic: an arriving job may shrink jobs of its own priority, as the paper's newJob does (false: only strictly lower priorities, as finegrain's placer)")
	fs.StringVar(&o.workload, "workload", "small", "genisys: the thesis's workload, pilot, small or large")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q; every input is a flag (see -h)", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.experiment != "" {
		return o, o.experimentFlags(*nodes, *strategies)
	}
	for _, name := range experimentOnly {
		if o.set[name] {
			return options{}, fmt.Errorf("-%s belongs to an experiment; give -experiment with it (elastic, or genisys for -workload)", name)
		}
	}
	var err error
	if o.nodes, err = parseInts(*nodes, "-nodes"); err != nil {
		return options{}, err
	}
	for _, n := range o.nodes {
		if n < 1 || n > 10_000 {
			return options{}, fmt.Errorf("-nodes %d: want 1 to 10000 nodes", n)
		}
	}
	if o.mix, err = parseMix(*mix); err != nil {
		return options{}, err
	}
	o.strategies = strings.Split(*strategies, ",")
	switch {
	case o.output != "table" && o.output != "json":
		return options{}, fmt.Errorf("-o %q: want table or json", o.output)
	case o.jobsPerNode < 1:
		return options{}, fmt.Errorf("-jobs-per-node %d: want at least 1", o.jobsPerNode)
	case o.jobs < 0:
		return options{}, fmt.Errorf("-jobs %d: want at least 1 (or 0 for -jobs-per-node)", o.jobs)
	case !(o.load > 0) || o.load > 100:
		return options{}, fmt.Errorf("-load %v: want more than 0 and at most 100", o.load)
	case o.reserved < 0:
		return options{}, fmt.Errorf("-system-reserved %d: want 0 or more CPUs", o.reserved)
	case o.seeds < 1 || o.seeds > 1000:
		return options{}, fmt.Errorf("-seeds %d: want 1 to 1000", o.seeds)
	case o.trace != "" && o.seeds > 1:
		return options{}, fmt.Errorf("-seeds draws several generated workloads; it makes no sense with -trace")
	case o.parallel < 1:
		return options{}, fmt.Errorf("-parallel %d: want at least 1", o.parallel)
	case o.trace != "" && o.writeTrace != "":
		return options{}, fmt.Errorf("-write-trace writes generated workloads; it makes no sense with -trace")
	}
	return o, nil
}

func parseInts(s, flagName string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%s %q: want whole numbers separated by commas", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseMix(s string) ([3]float64, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return [3]float64{}, fmt.Errorf("-mix %q: want three weights, cpu,memory,network", s)
	}
	var m [3]float64
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v >= 0) || v > 1e6 {
			return [3]float64{}, fmt.Errorf("-mix %q: weight %q is not a number from 0 to 1e6", s, p)
		}
		m[i] = v
	}
	if m[0]+m[1]+m[2] == 0 {
		return [3]float64{}, fmt.Errorf("-mix %q: at least one weight must be positive", s)
	}
	return m, nil
}
