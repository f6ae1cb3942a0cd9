package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

// The fine-grained scheduling paper's experiments 1 and 2.
const (
	finegrained1 = "finegrained-1"
	finegrained2 = "finegrained-2"
)

// finegrainedFlags are the flags the fine-grained scheduling experiments read.
var finegrainedFlags = []string{"experiment", "seed", "o", "parallel"}

func (o *options) finegrainedFlags() error {
	for name := range o.set {
		if !slices.Contains(finegrainedFlags, name) {
			return fmt.Errorf("-%s does not apply to -experiment %s (it reads %s)", name, o.experiment, strings.Join(finegrainedFlags, ", "))
		}
	}
	switch {
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q: want table or json", o.output)
	case o.parallel < 1:
		return fmt.Errorf("-parallel %d: want at least 1", o.parallel)
	}
	return nil
}

// runFinegrained runs experiment 1 (10 EP-DGEMM jobs; the seed draws nothing) or 2 (20 jobs the
// seed draws) under every scenario of the paper's Table II, on its four 2 × 18-core nodes with 4
// CPUs reserved on each.
func runFinegrained(w io.Writer, o options) error {
	machine, machineName, err := sim.LoadMachine(defaultMachine)
	if err != nil {
		return err
	}
	rep := &sim.FinegrainedReport{Command: o.command}
	var jobs []sim.Job
	if o.experiment == finegrained1 {
		jobs = sim.Finegrained1Jobs()
		rep.Experiment, rep.Workload = "Fine-grained scheduling, experiment 1", "10 EP-DGEMM jobs of 16 ranks, 60 s apart"
	} else {
		jobs = sim.Finegrained2Jobs(o.seed)
		rep.Experiment = "Fine-grained scheduling, experiment 2"
		rep.Workload = fmt.Sprintf("20 jobs of EP-DGEMM, EP-STREAM, G-RandomRing, G-FFT, MiniFE at random in 0–1,200 s (seed %d)", o.seed)
	}
	rep.Workload += fmt.Sprintf(" on %d nodes of %s, %d CPUs reserved on each", sim.FinegrainedNodes, machineName, sim.FinegrainedReserved)
	opts := sim.Options{Machine: machine, Nodes: sim.FinegrainedNodes, Model: sim.DefaultModel(), Queue: sim.DefaultQueueOptions(),
		SnapshotTTL: sim.DefaultSnapshotTTL, SystemReservedCPUs: sim.FinegrainedReserved}
	if rep.Results, err = sim.RunFinegrained(jobs, opts, o.parallel); err != nil {
		return err
	}
	if o.output == "json" {
		return sim.WriteFinegrainedJSON(w, rep)
	}
	return sim.WriteFinegrainedMarkdown(w, rep)
}
