package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/sim"
)

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.nodes) != 2 || o.nodes[0] != 4 || o.nodes[1] != 16 || o.jobsPerNode != 25 || o.load != 0.5 || o.seed != 1 ||
		o.machine != defaultMachine || o.baseline != "k8s" || o.output != "table" || o.reserved != 1 || o.mix != [3]float64{1, 1, 1} {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseOptions([]string{"-nodes", "2", "-jobs", "7", "-mix", "1,0,2", "-o", "json", "-strategies", "k8s,finegrain"}, io.Discard)
	if err != nil || o.jobs != 7 || o.mix != [3]float64{1, 0, 2} || o.output != "json" || len(o.strategies) != 2 {
		t.Errorf("flags: %+v, %v", o, err)
	}
	if _, err := parseOptions([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nodes", "4,x"}, "-nodes"},
		{[]string{"-nodes", "0"}, "want 1 to 10000 nodes"},
		{[]string{"-mix", "1,1"}, "three weights"},
		{[]string{"-mix", "1,-1,1"}, `weight "-1"`},
		{[]string{"-mix", "0,0,0"}, "at least one weight"},
		{[]string{"-o", "yaml"}, `-o "yaml"`},
		{[]string{"-load", "0"}, "-load 0"},
		{[]string{"-jobs-per-node", "0"}, "-jobs-per-node 0"},
		{[]string{"-system-reserved", "-1"}, "-system-reserved -1"},
		{[]string{"-parallel", "0"}, "-parallel 0"},
		{[]string{"-seeds", "0"}, "-seeds 0"},
		{[]string{"-trace", "t.yaml", "-seeds", "2"}, "-seeds draws several"},
		{[]string{"-trace", "t.yaml", "-write-trace", "out.yaml"}, "-write-trace"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		if _, err := parseOptions(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func runArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	o, err := parseOptions(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(&out, o)
	return out.String(), err
}

// TestRun runs the simulator from the repository root, as make does: a generated workload on
// two cluster sizes as JSON, a trace as markdown, and the model printed and read back.
func TestRun(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	dir := t.TempDir()
	out, err := runArgs(t, "-nodes", "2,3", "-jobs-per-node", "5", "-strategies", "k8s,finegrain,finegrain-none-least",
		"-o", "json", "-verify", "-write-trace", filepath.Join(dir, "w.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.Scenarios) != 2 || rep.Scenarios[1].Nodes != 3 || rep.Scenarios[1].Jobs != 15 || len(rep.Scenarios[0].Strategies) != 3 ||
		rep.Scenarios[0].Machine != "xeon-e5-2697v4-2s" || !strings.HasPrefix(rep.Command, "go run ./bench/simulator -nodes 2,3") {
		t.Errorf("report: %+v", rep)
	}
	data, err := os.ReadFile(filepath.Join(dir, "w-3nodes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := sim.DecodeCSV(bytes.NewReader(data), "w-3nodes.csv"); err != nil || len(jobs) != 15 {
		t.Errorf("written trace: %d jobs, %v", len(jobs), err)
	}

	out, err = runArgs(t, "-nodes", "2", "-jobs", "6", "-seeds", "3", "-seed", "5", "-strategies", "k8s,finegrain",
		"-write-trace", filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seed 5,", "seed 7,", "### 2 × xeon-e5-2697v4-2s over 3 seeds: change against k8s, mean (min … max)", "| finegrain | "} {
		if !strings.Contains(out, want) {
			t.Errorf("seeds: markdown lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s-seed7.yaml")); err != nil {
		t.Errorf("trace of seed 7: %v", err)
	}

	out, err = runArgs(t, "-trace", "bench/simulator/testdata/e2e-4jobs.yaml", "-nodes", "2", "-machine", "synthetic:2x1x1x4x1",
		"-strategies", "k8s,finegrain", "-model", "bench/simulator/testdata/model-fast-network.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "### 2 × synthetic:2x1x1x4x1 (16 CPUs), 4 jobs: trace bench/simulator/testdata/e2e-4jobs.yaml") || !strings.Contains(out, "| finegrain | 4 | 0 |") {
		t.Errorf("markdown:\n%s", out)
	}

	out, err = runArgs(t, "-print-model", "-model", "bench/simulator/testdata/model-fast-network.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.DecodeModel([]byte(out), "printed")
	if want := sim.DefaultModel(); err != nil || m.InterNodePenalty != 1 || m.Memory != want.Memory {
		t.Errorf("printed model %+v, %v", m, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-trace", "nope.yaml"}, "read trace"},
		{[]string{"-model", "nope.yaml"}, "read model"},
		{[]string{"-machine", "synthetic:1"}, "five counts"},
		{[]string{"-strategies", "slurm"}, "unknown strategy"},
		{[]string{"-nodes", "1", "-jobs", "2", "-strategies", "finegrain", "-baseline", "k8s"}, `baseline strategy "k8s"`},
	} {
		if _, err := runArgs(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
