package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command line: -o json gives every scenario with the experiments' keys and the
// steps' normalised times; the same seed gives the same bytes; -plot writes both charts.
func TestRunGenisysJSON(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	dir := t.TempDir()
	args := []string{"-experiment", "genisys", "-seed", "2", "-workload", "small", "-o", "json"}
	out, err := runArgs(t, append(args, "-plot", dir)...)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, s := range []string{"Dedicated", "Unmanaged", "Partitioned", "Thread-partitioned-50", "Thread-partitioned-75", "finegrain-least-loaded", "finegrain-most-loaded"} {
		m, ok := got[s]
		if !ok {
			t.Fatalf("no scenario %s in %v", s, out)
		}
		for _, k := range []string{"totalTime", "normalizedTotalTime", "makespan", "utilization", "meanNormalizedStepTime", "steps", "serviceViolationSeconds", "severeViolationSeconds", "serviceViolations"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s lacks %s", s, k)
			}
		}
		var steps []struct {
			Name                                 string
			NormalizedTime, NormalizedTurnaround float64
		}
		if err := json.Unmarshal(m["steps"], &steps); err != nil || len(steps) != 12 || steps[0].NormalizedTime < 1 || steps[0].NormalizedTurnaround <= 0 {
			t.Errorf("%s: steps %v (%v), want 12 normalised times of at least 1 and their turnarounds", s, steps, err)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d scenarios, want 7", len(got))
	}
	again, err := runArgs(t, args...)
	if err != nil || again != out {
		t.Errorf("a second run differs: %v\n%s\nwant\n%s", err, again, out)
	}
	for _, f := range []string{"genisys-small-utilization.png", "genisys-small-steps.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s: %v", f, err)
		}
	}
}

func TestRunGenisysTable(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out, err := runArgs(t, "-experiment", "genisys", "-seed", "2", "-workload", "pilot")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Genisys, pilot workload (seed 2) on 5 nodes of synthetic:2x1x1x8x1", "| Dedicated | 900 s | 1.000 |", "| job-1-step-3 | 16 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestGenisysFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-experiment", "genisys", "-nodes", "8"}, "-nodes does not apply to -experiment genisys"},
		{[]string{"-experiment", "genisys", "-workload", "huge"}, `-workload "huge": want one of pilot, small, large`},
		{[]string{"-experiment", "genisys", "-o", "csv"}, `-o "csv": want table or json`},
		{[]string{"-workload", "small"}, "-workload belongs to an experiment"},
	} {
		if _, err := parseOptions(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
