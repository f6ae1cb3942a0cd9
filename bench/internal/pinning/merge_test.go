package pinning

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
)

// writeRun writes what Report leaves for Merge: samples.json and context.json.
func writeRun(t *testing.T, samples []Sample, ctx Context) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]any{"samples.json": samples, "context.json": ctx} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// podSample is a valid run of one DGEMM rank on a pod.
func podSample(scenario string, rate float64) Sample {
	s := sample(scenario, "dgemm", rate, 10, 0)
	s.Via = ViaPods
	s.Run.Processes[0].DGEMM = &result.DGEMMStats{N: 64, Reps: 1}
	s.Run.Processes[0].RanOn = "0"
	return s
}

func TestMerge(t *testing.T) {
	none := writeRun(t, []Sample{podSample(Alone, 10), podSample(Exclusive, 9)},
		Context{Command: "pinning -on-cluster", LoadBefore: "0.1", LoadAfter: "0.5", CPUs: 2, Ranks: 1, Notes: []string{"coarse left out"}})
	static := writeRun(t, []Sample{podSample(Alone, 12), podSample(KubeletStatic, 8)},
		Context{Command: "pinning -on-cluster static", LoadBefore: "0.7", LoadAfter: "0.9", CPUs: 2, Ranks: 1, Notes: []string{"coarse left out"}})
	samples, ctx, err := Merge([]string{none, static})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4 || ctx.LoadBefore != "0.1" || ctx.LoadAfter != "0.9" || ctx.Ranks != 1 {
		t.Errorf("merged %d samples, context %+v", len(samples), ctx)
	}
	notes := strings.Join(ctx.Notes, "\n")
	if strings.Count(notes, "coarse left out") != 1 || !strings.Contains(notes, "part 2 ("+static+"): `pinning -on-cluster static`") {
		t.Errorf("notes:\n%s", notes)
	}
	rows, err := Summarize(samples, AllScenarios, []string{"dgemm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Median != 11 || rows[2].Scenario != KubeletStatic || rows[2].RatioToAlone != 8.0/11 {
		t.Errorf("rows of the merged samples: %+v", rows)
	}

	other := writeRun(t, []Sample{podSample(Alone, 1)}, Context{Command: "x", CPUs: 2, Ranks: 3})
	if _, _, err := Merge([]string{none, other}); err == nil || !strings.Contains(err.Error(), "ratios across them would mislead") {
		t.Errorf("merging runs of different rank counts: %v", err)
	}
	if _, _, err := Merge([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "read an earlier run's results") {
		t.Errorf("merging a directory without results: %v", err)
	}
}

func TestParseSamplesRejects(t *testing.T) {
	good, err := json.Marshal([]Sample{podSample(Alone, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSamples(good); err != nil {
		t.Fatalf("a valid samples file: %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"via":"pods"`, `"via":"ssh"`, `via "ssh"`},
		{`"scenario":"alone"`, `"scenario":"gang"`, `unknown scenario "gang"`},
		{`"benchmark":"dgemm"`, `"benchmark":"hpl"`, `benchmark "hpl"`},
		{`"rate":1`, `"rate":-1`, "rate"},
		{`"repeat":0`, `"repeat":0,"colour":1`, "unknown field"},
	} {
		bad := strings.Replace(string(good), tc.from, tc.to, 1)
		if bad == string(good) {
			t.Fatalf("%q not in %s", tc.from, good)
		}
		if _, err := ParseSamples([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: got %v, want an error containing %q", tc.from, tc.to, err, tc.want)
		}
	}
	if _, err := ParseSamples(append(good, good...)); err == nil || !strings.Contains(err.Error(), "trailing data") {
		t.Errorf("two documents: %v", err)
	}
}

// FuzzParseSamples: no samples file makes the reader panic, and what it accepts summarises or
// fails with an error.
func FuzzParseSamples(f *testing.F) {
	good, err := json.Marshal([]Sample{podSample(Alone, 1), podSample(Exclusive, 2)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"via":"pods"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ParseSamples(data)
		if err != nil {
			return
		}
		for _, s := range samples {
			if err := s.Run.Validate(); err != nil {
				t.Errorf("accepted an invalid run: %v", err)
			}
		}
		_, _ = Summarize(samples, AllScenarios, AllBenchmarks)
	})
}
