package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The command line: -o json gives, per strategy, exactly the six metrics.
func TestRunElasticJSON(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	dir := t.TempDir()
	out, err := runArgs(t, "-experiment", "elastic", "-seed", "4", "-submission-gap", "90s", "-rescale-gap", "60s", "-o", "json",
		"-plot", filepath.Join(dir, "plots"), "-write-trace", filepath.Join(dir, "jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]float64
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	keys := []string{"makespan", "overallResponse", "totalTime", "utilization", "weightedMeanCompletion", "weightedMeanResponse"}
	for _, s := range []string{"rigid-min", "rigid-max", "moldable", "elastic"} {
		var k []string
		for key := range got[s] {
			k = append(k, key)
		}
		slices.Sort(k)
		if !slices.Equal(k, keys) || got[s]["utilization"] <= 0 || got[s]["utilization"] > 1 {
			t.Errorf("%s: %v", s, got[s])
		}
	}
	if len(got) != 4 || got["elastic"]["utilization"] <= got["rigid-min"]["utilization"] {
		t.Errorf("strategies: %v", got)
	}
	for _, name := range []string{"elastic-usage.png", "elastic-submission-gap.png", "elastic-rescale-gap.png"} {
		if data, err := os.ReadFile(filepath.Join(dir, "plots", name)); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
			t.Errorf("plot %s: %v", name, err)
		}
	}
	// The written job set replays to the same figures.
	again, err := runArgs(t, "-experiment", "elastic", "-trace", filepath.Join(dir, "jobs.yaml"), "-o", "json")
	if err != nil || again != out {
		t.Errorf("replayed trace: %v\n%s\nwant\n%s", err, again, out)
	}
}

func TestRunElasticTable(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out, err := runArgs(t, "-experiment", "elastic", "-trace", "bench/simulator/testdata/elastic-6jobs.yaml", "-strategies", "moldable,elastic")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Elastic scheduler: 6 jobs (trace bench/simulator/testdata/elastic-6jobs.yaml) on 64 slots, rescale gap 1m0s",
		"| moldable | ", "| elastic | ", "| sim-d | medium | 1 | 120 |", "By rescale gap",
		"Mean completion by priority", "| 5 | 2 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "By submission gap") {
		t.Errorf("a trace has no submission-gap sweep:\n%s", out)
	}
	o, err := parseOptions([]string{"-experiment", "elastic"}, nil)
	if err != nil || o.nodes[0] != 4 || o.slotsPerNode != 16 || o.jobs != 20 || o.submissionGap.Seconds() != 90 || o.rescaleGap.Seconds() != 60 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// -seeds runs several job sets and prints the across-seeds table; -shrink-equal-priority=false
// is the placer's shrink rule, which changes elastic's figures only.
func TestRunElasticSeedsAndShrinkRule(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out, err := runArgs(t, "-experiment", "elastic", "-seed", "4", "-seeds", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 seeds of 20 jobs submitted 1m30s apart on 64 slots, rescale gap 1m0s", "| 4 | ", "| 5 | ", "| weighted mean completion | best |"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	var paper, placer map[string]map[string]float64
	for _, run := range []struct {
		rule string
		into *map[string]map[string]float64
	}{{"true", &paper}, {"false", &placer}} {
		out, err := runArgs(t, "-experiment", "elastic", "-seed", "4", "-o", "json", "-shrink-equal-priority="+run.rule)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), run.into); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"rigid-min", "rigid-max", "moldable"} {
		if !maps.Equal(paper[s], placer[s]) {
			t.Errorf("%s changes with the shrink rule: %v, %v", s, paper[s], placer[s])
		}
	}
	if maps.Equal(paper["elastic"], placer["elastic"]) {
		t.Errorf("elastic does not change with the shrink rule: %v", paper["elastic"])
	}
}

func TestElasticOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-experiment", "hpcc"}, `-experiment "hpcc": want elastic`},
		{[]string{"-experiment", "elastic", "-load", "0.5"}, "-load does not apply to -experiment elastic"},
		{[]string{"-experiment", "elastic", "-nodes", "4,16"}, "one cluster of 1 to 10000 nodes"},
		{[]string{"-experiment", "elastic", "-submission-gap", "-1s"}, "-submission-gap -1s"},
		{[]string{"-experiment", "elastic", "-rescale-gap", "-1s"}, "-rescale-gap -1s"},
		{[]string{"-experiment", "elastic", "-slots-per-node", "0"}, "-slots-per-node 0"},
		{[]string{"-experiment", "elastic", "-trace", "t.yaml", "-seed", "3"}, "-jobs, -seed and -seeds draw job sets"},
		{[]string{"-experiment", "elastic", "-trace", "t.yaml", "-seeds", "3"}, "-jobs, -seed and -seeds draw job sets"},
		{[]string{"-experiment", "elastic", "-seeds", "0"}, "-seeds 0: want 1 to 1000"},
		{[]string{"-experiment", "elastic", "-seeds", "2", "-o", "json"}, "-seeds 2 prints one table over the seeds"},
		{[]string{"-experiment", "elastic", "-seeds", "2", "-plot", "p"}, "-seeds 2 prints one table over the seeds"},
		{[]string{"-shrink-equal-priority=false"}, "-shrink-equal-priority belongs to an experiment"},
		{[]string{"-priority-by-type"}, "-priority-by-type belongs to an experiment"},
		{[]string{"-experiment", "finegrained-1", "-priority-by-type"}, "-priority-by-type"},
		{[]string{"-rescale-gap", "30s"}, "-rescale-gap belongs to an experiment"},
	} {
		if _, err := parseOptions(tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	t.Chdir(filepath.Join("..", ".."))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-experiment", "elastic", "-strategies", "greedy"}, `unknown elastic strategy "greedy"`},
		{[]string{"-experiment", "elastic", "-trace", "nope.yaml"}, "read trace"},
		{[]string{"-experiment", "elastic", "-nodes", "1", "-slots-per-node", "8"}, "needs 16 replicas and a launcher; the cluster has 8 slots"},
	} {
		if _, err := runArgs(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
