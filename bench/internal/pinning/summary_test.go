package pinning

import (
	"bytes"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/worker"
)

func u64(v uint64) *uint64 { return &v }

// sample builds a one-rank sample with the given total rate and software counters.
func sample(scenario, bench string, rate float64, switches uint64, noise float64) Sample {
	counters := []result.Counter{
		{Name: "task-clock", Unit: "ns", Value: u64(uint64(rate * 1e8))},
		{Name: "context-switches", Value: u64(switches)},
		{Name: "cpu-migrations", Value: u64(switches / 10)},
		{Name: "cycles", Unavailable: "cycles unavailable: ENOENT: no PMU"},
	}
	s := Sample{Via: ViaCgroups, Scenario: scenario, Benchmark: bench, Ranks: "floating", Neighbour: "none",
		Run: result.Run{Benchmark: bench, Unit: result.UnitGFLOPS,
			Processes: []result.Process{{Rank: 0, PID: 1, Rate: rate, Seconds: 1}},
			Total:     result.Total{Rate: rate, Counters: counters, VoluntarySwitches: 1, InvoluntarySwitches: switches, RanOn: "0"}}}
	if noise > 0 {
		s.Noise = &worker.NoiseResult{GBs: noise}
	}
	return s
}

func TestSummarize(t *testing.T) {
	samples := []Sample{
		sample(Alone, "dgemm", 10, 100, 0),
		sample(Alone, "dgemm", 12, 300, 0),
		sample(Alone, "dgemm", 11, 200, 0),
		sample(Unmanaged, "dgemm", 5, 1000, 3),
		sample(Unmanaged, "dgemm", 7, 3000, 5),
	}
	samples[4].Run.Total.RanOn = "1"
	rows, err := Summarize(samples, AllScenarios, []string{"dgemm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want alone and unmanaged", len(rows))
	}
	a, un := rows[0], rows[1]
	if a.Median != 11 || a.Min != 10 || a.Max != 12 || a.Runs != 3 || a.RatioToAlone != 1 || a.ContextSwitches != 200 {
		t.Errorf("alone row %+v", a)
	}
	if un.Median != 6 || un.RatioToAlone != 6.0/11 || un.RanOn != "0-1" || un.NoiseGBs != 4 || un.InvoluntarySwitches != 2000 {
		t.Errorf("unmanaged row %+v", un)
	}
	if !(a.CPUShare > 1.09 && a.CPUShare < 1.11) || !(a.PerCPUSecond > 9.99 && a.PerCPUSecond < 10.01) {
		t.Errorf("alone CPU share %v, per CPU-second %v; want task-clock 1.1 s over 1 s, rate 11 over share 1.1", a.CPUShare, a.PerCPUSecond)
	}
	if c := a.Hardware[0]; c.Name != "cycles" || c.Value != nil || !strings.Contains(c.Unavailable, "ENOENT") {
		t.Errorf("cycles %+v, want unavailable with the kernel's reason", c)
	}
	if c := a.Hardware[1]; c.Unavailable != "not measured" {
		t.Errorf("instructions %+v, want marked as not measured", c)
	}
}

func TestSummarizeNeedsAlone(t *testing.T) {
	_, err := Summarize([]Sample{sample(Unmanaged, "stream", 1, 1, 1)}, AllScenarios, []string{"stream"})
	if err == nil || !strings.Contains(err.Error(), "no alone sample") {
		t.Errorf("got %v, want an error about the missing baseline", err)
	}
	bad := sample(Alone, "stream", 1, 1, 0)
	bad.Run.Total.Counters = bad.Run.Total.Counters[1:]
	if _, err := Summarize([]Sample{bad}, AllScenarios, []string{"stream"}); err == nil || !strings.Contains(err.Error(), "task-clock missing") {
		t.Errorf("got %v, want an error naming the missing software counter", err)
	}
}

func TestMarkdownAndPlot(t *testing.T) {
	rows, err := Summarize([]Sample{
		sample(Alone, "dgemm", 40, 100, 0),
		sample(Unmanaged, "dgemm", 20, 900, 5),
		sample(Exclusive, "dgemm", 39, 120, 5),
	}, AllScenarios, []string{"dgemm"})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	WriteMarkdown(&md, rows)
	for _, want := range []string{
		"| scenario | benchmark | median |",
		"| unmanaged | dgemm | 20.00 GFLOP/s | 20.00 – 20.00 | 0.500 | 2.00 | 10.00 |",
		"| exclusive | dgemm | 39.00 GFLOP/s | 39.00 – 39.00 | 0.975 |",
		"n/a: cycles unavailable: ENOENT: no PMU",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, "EP-DGEMM", rows); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Fatalf("plot is %v, want %dx%d", b, plotW, plotH)
	}
	// The middle of each bar, just above the axis, has the scenario's colour.
	slot := (plotW - marginR - marginL) / len(rows)
	for i, r := range rows {
		x, y := marginL+slot*i+slot/2+5, plotH-marginB-3
		got := img.At(x, y)
		if got != scenarioColors[r.Scenario] {
			t.Errorf("bar of %s at (%d,%d) is %v, want %v", r.Scenario, x, y, got, scenarioColors[r.Scenario])
		}
	}
	if err := WritePlot(&buf, "empty", nil); err == nil {
		t.Error("plotting no rows succeeded")
	}
}

func TestMarkdownWarnsWhenBaselineStarved(t *testing.T) {
	for _, tc := range []struct {
		rate float64 // the fake task-clock is rate/10 CPU-seconds over 1 s
		warn bool
	}{{5, true}, {40, false}} {
		rows, err := Summarize([]Sample{sample(Alone, "stream", tc.rate, 1, 0)}, AllScenarios, []string{"stream"})
		if err != nil {
			t.Fatal(err)
		}
		var md strings.Builder
		WriteMarkdown(&md, rows)
		if got := strings.Contains(md.String(), "**Busy machine:** alone (cgroups), the stream ranks got only 50 %"); got != tc.warn {
			t.Errorf("CPU share %.2f: warning shown %v, want %v:\n%s", rows[0].CPUShare, got, tc.warn, md.String())
		}
	}
}

// TestSummarizeKeepsCgroupsAndPodsApart: each way of running has its own rows and its own
// baseline, and DGEMM rows name their BLAS backend.
func TestSummarizeKeepsCgroupsAndPodsApart(t *testing.T) {
	pod := func(scenario string, rate float64) Sample {
		s := sample(scenario, "dgemm", rate, 10, 0)
		s.Via, s.Run.Backend = ViaPods, "gonum"
		return s
	}
	rows, err := Summarize([]Sample{
		pod(Alone, 4), sample(Alone, "dgemm", 40, 100, 0), pod(Exclusive, 3), sample(Exclusive, "dgemm", 20, 100, 0),
	}, AllScenarios, []string{"dgemm"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %.2f", r.Via, r.Scenario, r.Backend, r.RatioToAlone))
	}
	want := []string{"pods alone gonum 1.00", "pods exclusive gonum 0.75", "cgroups alone  1.00", "cgroups exclusive  0.50"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("rows %q, want %q", got, want)
	}
	var md strings.Builder
	WriteMarkdown(&md, rows)
	if !strings.Contains(md.String(), "| pods | exclusive | dgemm, gonum | 3.00 GFLOP/s |") {
		t.Errorf("markdown lacks the pods row with its backend:\n%s", md.String())
	}
	if _, err := Summarize([]Sample{pod(Exclusive, 3), sample(Alone, "dgemm", 40, 100, 0)}, AllScenarios, []string{"dgemm"}); err == nil || !strings.Contains(err.Error(), "pods, dgemm: no alone sample") {
		t.Errorf("pods without their own baseline: %v", err)
	}
}
