package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

// run builds one scenario per cluster size, simulates every strategy and writes the report.
func run(w io.Writer, o options) error {
	switch o.experiment {
	case "elastic":
		return runElastic(w, o)
	case finegrained1, finegrained2:
		return runFinegrained(w, o)
	case genisys:
		return runGenisys(w, o)
	}
	model := sim.DefaultModel()
	if o.model != "" {
		data, err := os.ReadFile(o.model)
		if err != nil {
			return fmt.Errorf("read model: %w", err)
		}
		if model, err = sim.DecodeModel(data, o.model); err != nil {
			return err
		}
	}
	if o.printModel {
		out, err := sim.EncodeModel(model)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	strategies, err := sim.SelectStrategies(o.strategies)
	if err != nil {
		return err
	}
	machine, machineName, err := sim.LoadMachine(o.machine)
	if err != nil {
		return err
	}
	var traced []sim.Job
	if o.trace != "" {
		if traced, err = readTrace(o.trace); err != nil {
			return err
		}
	}
	rep := &sim.Report{Command: o.command}
	for _, nodes := range o.nodes {
		for k := range o.seeds {
			sc := &sim.Scenario{
				Machine: machineName, Jobs: traced, Workload: "trace " + o.trace, Strategies: strategies, Baseline: o.baseline,
				Options: sim.Options{Machine: machine, Nodes: nodes, Model: model, Queue: sim.DefaultQueueOptions(),
					SnapshotTTL: sim.DefaultSnapshotTTL, SystemReservedCPUs: o.reserved, Verify: o.verify},
			}
			if o.trace == "" {
				if sc.Jobs, sc.Workload, err = generate(o, nodes, machine.NumCPUs(), o.seed+uint64(k)); err != nil {
					return err
				}
			}
			res, err := sc.Run(o.parallel)
			if err != nil {
				return fmt.Errorf("%d nodes: %w", nodes, err)
			}
			rep.Scenarios = append(rep.Scenarios, res)
		}
	}
	rep.AcrossSeeds = sim.SummarizeSeeds(rep.Scenarios)
	if o.output == "json" {
		return sim.WriteJSON(w, rep)
	}
	return sim.WriteMarkdown(w, rep)
}

// generate draws the workload of one cluster size and seed, saving it when -write-trace asks.
func generate(o options, nodes, cpusPerNode int, seed uint64) ([]sim.Job, string, error) {
	n := o.jobs
	if n == 0 {
		n = o.jobsPerNode * nodes
	}
	jobs, err := sim.Generate(sim.GenOptions{Jobs: n, Seed: seed, Load: o.load, Batch: o.batch, ClusterCPUs: nodes * cpusPerNode, Mix: o.mix})
	if err != nil {
		return nil, "", err
	}
	arrivals := fmt.Sprintf("load %g", o.load)
	if o.batch {
		arrivals = "all submitted at 0"
	}
	if err := writeTrace(o, nodes, seed, jobs); err != nil {
		return nil, "", err
	}
	return jobs, fmt.Sprintf("generated (seed %d, %s, cpu:memory:network %g:%g:%g)", seed, arrivals, o.mix[0], o.mix[1], o.mix[2]), nil
}

func readTrace(path string) ([]sim.Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		return sim.DecodeCSV(bytes.NewReader(data), path)
	}
	return sim.DecodeTrace(data, path)
}

// writeTrace saves a generated workload when -write-trace asks for it: as CSV when the name
// ends in .csv, else YAML; with several cluster sizes the node count, with several seeds the
// seed, goes before the extension.
func writeTrace(o options, nodes int, seed uint64, jobs []sim.Job) error {
	if o.writeTrace == "" {
		return nil
	}
	path := o.writeTrace
	ext := filepath.Ext(path)
	path = strings.TrimSuffix(path, ext)
	if len(o.nodes) > 1 {
		path += "-" + strconv.Itoa(nodes) + "nodes"
	}
	if o.seeds > 1 {
		path += "-seed" + strconv.FormatUint(seed, 10)
	}
	path += ext
	var buf bytes.Buffer
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		if err := sim.EncodeCSV(&buf, jobs); err != nil {
			return err
		}
	} else {
		out, err := sim.EncodeTrace(jobs)
		if err != nil {
			return err
		}
		buf.Write(out)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}
