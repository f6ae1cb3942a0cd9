package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

// experimentOnly are the flags only an experiment reads.
var experimentOnly = []string{"submission-gap", "rescale-gap", "slots-per-node", "plot", "workload", "shrink-equal-priority", "priority-by-type"}

// elasticFlags are the flags the elastic experiment reads; any other is an error with it.
var elasticFlags = []string{"experiment", "seed", "jobs", "nodes", "strategies", "trace", "o", "write-trace", "submission-gap", "rescale-gap", "slots-per-node", "plot", "seeds", "shrink-equal-priority", "priority-by-type"}

// Defaults of the elastic experiment: the paper's 4 nodes × 16 slots and our job count.
const (
	elasticNodes = 4
	elasticJobs  = 20
)

// elasticSweep are the sweeps' points: submission gaps 0–300 s, rescale gaps 0–300 s.
var (
	elasticSubmissionGaps = []time.Duration{0, 30 * time.Second, 60 * time.Second, 90 * time.Second, 120 * time.Second,
		150 * time.Second, 180 * time.Second, 240 * time.Second, 300 * time.Second}
	elasticRescaleGaps = []time.Duration{0, 15 * time.Second, 30 * time.Second, 60 * time.Second, 120 * time.Second,
		180 * time.Second, 300 * time.Second}
)

// experimentFlags checks the flags of an experiment run.
func (o *options) experimentFlags(nodes, strategies string) error {
	switch o.experiment {
	case "elastic":
	case finegrained1, finegrained2:
		return o.finegrainedFlags()
	case genisys:
		return o.genisysFlags()
	default:
		return fmt.Errorf("-experiment %q: want elastic, %s, %s or %s", o.experiment, finegrained1, finegrained2, genisys)
	}
	for name := range o.set {
		if !slices.Contains(elasticFlags, name) {
			return fmt.Errorf("-%s does not apply to -experiment elastic (it reads %s)", name, strings.Join(elasticFlags, ", "))
		}
	}
	o.nodes = []int{elasticNodes}
	if o.set["nodes"] {
		ns, err := parseInts(nodes, "-nodes")
		if err != nil {
			return err
		}
		if len(ns) != 1 || ns[0] < 1 || ns[0] > 10_000 {
			return fmt.Errorf("-nodes %s: -experiment elastic simulates one cluster of 1 to 10000 nodes", nodes)
		}
		o.nodes = ns
	}
	o.strategies = strings.Split(strategies, ",")
	switch {
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q: want table or json", o.output)
	case o.jobs < 0 || o.jobs > sim.MaxJobs:
		return fmt.Errorf("-jobs %d: want 1 to %d (or 0 for %d)", o.jobs, sim.MaxJobs, elasticJobs)
	case o.submissionGap < 0:
		return fmt.Errorf("-submission-gap %v: want 0 or more", o.submissionGap)
	case o.rescaleGap < 0:
		return fmt.Errorf("-rescale-gap %v: want 0 or more", o.rescaleGap)
	case o.slotsPerNode < 1 || o.slotsPerNode > 1024:
		return fmt.Errorf("-slots-per-node %d: want 1 to 1024", o.slotsPerNode)
	case o.trace != "" && o.writeTrace != "":
		return fmt.Errorf("-write-trace writes generated workloads; it makes no sense with -trace")
	case o.trace != "" && (o.set["jobs"] || o.set["seed"] || o.set["seeds"]):
		return fmt.Errorf("-jobs, -seed and -seeds draw job sets; they make no sense with -trace")
	case o.seeds < 1 || o.seeds > 1000:
		return fmt.Errorf("-seeds %d: want 1 to 1000", o.seeds)
	case o.seeds > 1 && (o.output != "table" || o.plotDir != "" || o.writeTrace != ""):
		return fmt.Errorf("-seeds %d prints one table over the seeds; -o json, -plot and -write-trace take one seed (leave -seeds out)", o.seeds)
	}
	if o.jobs == 0 {
		o.jobs = elasticJobs
	}
	return nil
}

// runElastic runs the elastic scheduler's experiment and writes its table or JSON, and its
// charts when -plot asks.
func runElastic(w io.Writer, o options) error {
	model := sim.DefaultElasticModel()
	model.PriorityByType = o.priorityByType
	strategies, err := sim.ParseElasticStrategies(o.strategies)
	if err != nil {
		return err
	}
	opts := sim.ElasticOptions{Model: model, Slots: o.nodes[0] * o.slotsPerNode, RescaleGap: o.rescaleGap, ShrinkLowerOnly: !o.shrinkEqualPriority}
	if o.seeds > 1 {
		r, err := sim.RunElasticSeeds(o.command, opts, strategies, o.jobs, o.seed, o.seeds, o.submissionGap)
		if err != nil {
			return err
		}
		return sim.WriteElasticSeedsMarkdown(w, r)
	}
	e := &sim.ElasticExperiment{Options: opts, Strategies: strategies, RescaleGaps: elasticRescaleGaps}
	if o.trace != "" {
		data, err := os.ReadFile(o.trace)
		if err != nil {
			return fmt.Errorf("read trace: %w", err)
		}
		if e.Jobs, err = sim.DecodeElasticTrace(data, o.trace, &model); err != nil {
			return err
		}
		e.Workload = "trace " + o.trace
	} else {
		e.Generate = func(gap time.Duration) ([]sim.ElasticJob, error) {
			return sim.GenerateElastic(&model, o.jobs, o.seed, gap)
		}
		e.SubmissionGaps = elasticSubmissionGaps
		if e.Jobs, err = e.Generate(o.submissionGap); err != nil {
			return err
		}
		e.Workload = fmt.Sprintf("seed %d, submitted %v apart", o.seed, o.submissionGap)
		if o.writeTrace != "" {
			out, err := sim.EncodeElasticTrace(e.Jobs)
			if err != nil {
				return err
			}
			if err := os.WriteFile(o.writeTrace, out, 0o644); err != nil {
				return fmt.Errorf("write trace: %w", err)
			}
		}
	}
	rep, err := e.Run(o.command)
	if err != nil {
		return err
	}
	if o.plotDir != "" {
		if err := writePlots(o.plotDir, rep); err != nil {
			return err
		}
	}
	if o.output == "json" {
		return sim.WriteElasticJSON(w, rep)
	}
	return sim.WriteElasticMarkdown(w, rep)
}

func writePlots(dir string, rep *sim.ElasticReport) error {
	plots, err := sim.ElasticPlots(rep)
	if err != nil {
		return err
	}
	return writePlotFiles(dir, plots)
}

// writePlotFiles writes each chart into dir under its file name.
func writePlotFiles(dir string, plots map[string]func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	for name, draw := range plots {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		err = draw(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
	}
	return nil
}
