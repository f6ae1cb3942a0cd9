package result

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func load(t *testing.T, name string) Run {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return run
}

// The testdata documents were written by fgworker on a 2-CPU KVM guest without a PMU.
func TestParseRealOutput(t *testing.T) {
	d := load(t, "dgemm-openblas-2proc.json")
	if d.Benchmark != BenchDGEMM || d.Unit != UnitGFLOPS || len(d.Processes) != 2 || !strings.HasPrefix(d.Backend, "openblas") {
		t.Errorf("dgemm run parsed as %s/%s/%q with %d processes", d.Benchmark, d.Unit, d.Backend, len(d.Processes))
	}
	if c, ok := d.Total.Counter("task-clock"); !ok || c.Value == nil || *c.Value == 0 {
		t.Errorf("task-clock total %+v, want a positive count", c)
	}
	if c, ok := d.Total.Counter("cycles"); !ok || c.Value != nil || !strings.Contains(c.Unavailable, "ENOENT") {
		t.Errorf("cycles total %+v, want unavailable with ENOENT", c)
	}
	s := load(t, "stream-2proc.json")
	if s.Processes[1].STREAM == nil || s.Processes[1].STREAM.Kernels[3].Name != "triad" {
		t.Errorf("stream run lacks the triad kernel: %+v", s.Processes[1].STREAM)
	}
}

func TestAggregateRecomputesTotals(t *testing.T) {
	for _, name := range []string{"dgemm-openblas-2proc.json", "stream-2proc.json"} {
		run := load(t, name)
		again, err := Aggregate(run.Benchmark, run.Backend, run.Unit, run.Processes)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(run, again); d != "" {
			t.Errorf("%s: totals differ from a fresh aggregation (-file +fresh):\n%s", name, d)
		}
	}
}

func u(v uint64) *uint64 { return &v }

func TestAggregateUnavailableWins(t *testing.T) {
	base := Process{PID: 1, RanOn: "0", STREAM: &STREAMStats{ArrayLen: 1, NTimes: 2, Kernels: make([]Kernel, 4)}}
	a, b := base, base
	a.Rank, b.Rank, b.PID, b.RanOn = 0, 1, 2, "1"
	a.Counters = []Counter{{Name: "cycles", Value: u(10)}, {Name: "page-faults", Value: u(1), Scaled: true}}
	b.Counters = []Counter{{Name: "cycles", Unavailable: "cycles unavailable: EACCES"}, {Name: "page-faults", Value: u(2)}}
	run, err := Aggregate(BenchSTREAM, "", UnitGBs, []Process{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := []Counter{
		{Name: "cycles", Unavailable: "rank 1: cycles unavailable: EACCES"},
		{Name: "page-faults", Value: u(3), Scaled: true},
	}
	if d := cmp.Diff(want, run.Total.Counters); d != "" {
		t.Errorf("total counters (-want +got):\n%s", d)
	}
	if run.Total.RanOn != "0-1" {
		t.Errorf("total ran on %q, want 0-1", run.Total.RanOn)
	}
	if *a.Counters[0].Value != 10 {
		t.Error("Aggregate changed a process's counter")
	}
}

// mutate parses the dgemm testdata, applies f to the raw JSON object and parses it back.
func mutate(t *testing.T, f func(m map[string]any)) error {
	t.Helper()
	raw, err := os.ReadFile("testdata/dgemm-openblas-2proc.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(bytes.NewReader(out))
	return err
}

func proc(m map[string]any, i int) map[string]any { return m["processes"].([]any)[i].(map[string]any) }

func counter(m map[string]any, i, c int) map[string]any {
	return proc(m, i)["counters"].([]any)[c].(map[string]any)
}

func TestParseRejectsBadDocuments(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(m map[string]any)
		want string
	}{
		{"unknown benchmark", func(m map[string]any) { m["benchmark"] = "hpl"; m["unit"] = "x" }, `unknown benchmark "hpl"`},
		{"wrong unit", func(m map[string]any) { m["unit"] = UnitGBs }, `unit "GB/s"`},
		{"unknown field", func(m map[string]any) { m["gflops"] = 1 }, `unknown field "gflops"`},
		{"no processes", func(m map[string]any) { m["processes"] = []any{} }, "no processes"},
		{"duplicate rank", func(m map[string]any) { proc(m, 1)["rank"] = 0 }, "rank 0 appears twice"},
		{"negative rate", func(m map[string]any) { proc(m, 0)["rate"] = -1 }, "rank 0"},
		{"failed check", func(m map[string]any) { proc(m, 1)["dgemm"].(map[string]any)["check"] = 2 }, "passed check"},
		{"both details", func(m map[string]any) { proc(m, 0)["stream"] = map[string]any{} }, "exactly one of dgemm and stream"},
		{"bad cpu list", func(m map[string]any) { proc(m, 0)["ranOn"] = "0-x" }, `CPUs ran on "0-x"`},
		{"zero instead of unavailable", func(m map[string]any) { delete(counter(m, 0, 4), "unavailable") }, "counter cycles must have either"},
		{"value and reason", func(m map[string]any) { counter(m, 0, 4)["value"] = 0 }, "counter cycles must have either"},
		{"duplicate counter", func(m map[string]any) { counter(m, 1, 1)["name"] = "task-clock" }, "counter task-clock appears twice"},
	} {
		err := mutate(t, tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	for _, bad := range []string{"", "{", "[]", `{"benchmark":"dgemm"} {}`} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, load(t, "dgemm-openblas-2proc.json")); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"dgemm: 2 process(es), openblas",
		"GFLOP/s sustained",
		"task-clock ms",
		"n/a cycles unavailable: ENOENT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n  total") != 2 {
		t.Errorf("want a total row in both tables:\n%s", out)
	}
}
