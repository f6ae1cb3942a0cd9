package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The command line: -o json gives, per Table II scenario, exactly the six metrics, and
// the same seed gives the same figures.
func TestRunFinegrainedJSON(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	keys := []string{"makespan", "overallResponse", "totalTime", "utilization", "weightedMeanCompletion", "weightedMeanResponse"}
	for _, args := range [][]string{{"-experiment", "finegrained-1"}, {"-experiment", "finegrained-2", "-seed", "3"}} {
		out, err := runArgs(t, append(args, "-o", "json")...)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]map[string]float64
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %v:\n%s", args, err, out)
		}
		if len(got) != 6 {
			t.Errorf("%v: %d scenarios, want 6: %v", args, len(got), got)
		}
		for _, s := range []string{"NONE", "CM", "CM_S", "CM_G", "CM_S_TG", "CM_G_TG"} {
			var k []string
			for key := range got[s] {
				k = append(k, key)
			}
			slices.Sort(k)
			m := got[s]
			if !slices.Equal(k, keys) || m["utilization"] <= 0 || m["utilization"] > 1 || m["makespan"] > m["totalTime"] || m["weightedMeanCompletion"] <= m["weightedMeanResponse"] {
				t.Errorf("%v %s: %v", args, s, m)
			}
		}
		again, err := runArgs(t, append(args, "-o", "json", "-parallel", "1")...)
		if err != nil || again != out {
			t.Errorf("%v: a second run (one simulation at a time) differs: %v\n%s\nwant\n%s", args, err, again, out)
		}
	}
}

func TestRunFinegrainedTable(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out, err := runArgs(t, "-experiment", "finegrained-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"10 EP-DGEMM jobs of 16 ranks, 60 s apart on 4 nodes of xeon-e5-2697v4-2s, 4 CPUs reserved on each",
		"| NONE | k8s | ", "| CM | k8s-static-besteffort | ", "| CM_S | finegrain-scale-least-no-task-groups | ",
		"| CM_G_TG | finegrain-granularity-least | ", "| ep-dgemm-10 | 540 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestFinegrainedFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-experiment", "finegrained-2", "-nodes", "8"}, "-nodes does not apply to -experiment finegrained-2"},
		{[]string{"-experiment", "finegrained-1", "-o", "csv"}, `-o "csv": want table or json`},
		{[]string{"-experiment", "finegrained-3"}, `-experiment "finegrained-3": want elastic, finegrained-1, finegrained-2 or genisys`},
	} {
		if _, err := parseOptions(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
