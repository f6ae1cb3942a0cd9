package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

// genisys is the Genisys thesis's experiment.
const genisys = "genisys"

// genisysFlags are the flags the Genisys experiment reads.
var genisysFlags = []string{"experiment", "seed", "o", "workload", "plot"}

func (o *options) genisysFlags() error {
	for name := range o.set {
		if !slices.Contains(genisysFlags, name) {
			return fmt.Errorf("-%s does not apply to -experiment %s (it reads %s)", name, genisys, strings.Join(genisysFlags, ", "))
		}
	}
	switch {
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q: want table or json", o.output)
	case !slices.Contains(sim.GenisysWorkloads, o.workload):
		return fmt.Errorf("-workload %q: want one of %s", o.workload, strings.Join(sim.GenisysWorkloads, ", "))
	}
	return nil
}

// runGenisys runs one Genisys workload, drawn from the seed, under every scenario and writes its
// table or JSON, and its charts when -plot asks.
func runGenisys(w io.Writer, o options) error {
	wl, err := sim.GenisysWorkloadOf(o.workload, o.seed)
	if err != nil {
		return err
	}
	rep := &sim.GenisysReport{Command: o.command, Workload: o.workload, Machine: sim.GenisysMachine, Seed: o.seed, Services: wl.Services, Jobs: wl.Jobs}
	if rep.Results, err = sim.RunGenisys(&wl); err != nil {
		return err
	}
	if o.plotDir != "" {
		plots, err := sim.GenisysPlots(rep)
		if err != nil {
			return err
		}
		if err := writePlotFiles(o.plotDir, plots); err != nil {
			return err
		}
	}
	if o.output == "json" {
		return sim.WriteGenisysJSON(w, rep)
	}
	return sim.WriteGenisysMarkdown(w, rep)
}
