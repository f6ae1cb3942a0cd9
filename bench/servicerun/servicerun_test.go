package servicerun

import (
	"encoding/json"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

func TestViolationSeconds(t *testing.T) {
	seconds := []loadgen.Second{
		{Second: 0, Offered: 40, P99Seconds: 0.010},
		{Second: 1, Offered: 40, P99Seconds: 0.051},            // over 50 ms
		{Second: 2, Offered: 40, P99Seconds: 0.050},            // at the target: met
		{Second: 3, Offered: 40, P99Seconds: 0.004, Errors: 1}, // a failure
		{Second: 4, Offered: 0},                                // no load: nothing to violate
		{Second: 5, Offered: 40, Errors: 40},                   // all failed, no latency
	}
	if got := violationSeconds(seconds, 0.050); got != 3 {
		t.Errorf("violationSeconds = %d, want 3 (seconds 1, 3, 5)", got)
	}
}

func pt(tt float64, replicas int32, podCPU float64, usage map[string]float64) Point {
	return Point{T: tt, Replicas: replicas, PodCPU: podCPU, usage: usage}
}

func TestCPUSecondsAndRate(t *testing.T) {
	points := []Point{
		pt(0, 1, 0.5, map[string]float64{"a": 100}),             // a ran before the load: its 100 s are not counted
		pt(1, 1, 0.5, map[string]float64{"a": 100.5}),           //
		pt(2, 2, 0.5, map[string]float64{"a": 101, "b": 0.25}),  // b new: counted from zero
		pt(4, 2, 0.5, map[string]float64{"a": 102, "b": 1.25}),  //
		pt(5, 1, 0.5, map[string]float64{"b": 2}),               // a gone: its last value holds
		pt(6, 1, 1.0, map[string]float64{"b": 2.5, "c": 0.125}), //
	}
	if got, want := cpuSeconds(points), 2.0+2.5+0.125; math.Abs(got-want) > 1e-9 {
		t.Errorf("cpuSeconds = %v, want %v", got, want)
	}
	fillCPUUsed(points)
	want := []float64{0, 0.5, 0.75, 1, 0.75, 0.625}
	for i, p := range points {
		if math.Abs(p.CPUUsed-want[i]) > 1e-9 {
			t.Errorf("point %d (t=%v): CPUUsed = %v, want %v", i, p.T, p.CPUUsed, want[i])
		}
	}
	if got := cpuSeconds(nil); got != 0 {
		t.Errorf("cpuSeconds(nil) = %v", got)
	}
}

func TestGrantedSeconds(t *testing.T) {
	points := []Point{{T: 0, Granted: 0.5}, {T: 2, Granted: 1.5}, {T: 3, Granted: 0.25}, {T: 7, Granted: 9}}
	// 0.5 × 2 + 1.5 × 1 + 0.25 × 4; the last sample's grant has no time after it.
	if got, want := grantedSeconds(points), 3.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("grantedSeconds = %v, want %v", got, want)
	}
	if got := grantedSeconds(points[:1]); got != 0 {
		t.Errorf("grantedSeconds of one sample = %v, want 0", got)
	}
}

func TestDecisions(t *testing.T) {
	points := []Point{pt(0, 1, 0.5, nil), pt(1, 1, 0.5, nil), pt(2, 2, 0.5, nil), pt(3, 2, 1, nil), pt(4, 2, 1, nil), pt(5, 1, 0.25, nil)}
	var at []float64
	for _, d := range decisions(points) {
		at = append(at, d.T)
	}
	if !slices.Equal(at, []float64{2, 3, 5}) {
		t.Errorf("decisions at %v, want [2 3 5]", at)
	}
}

// sampleResult is a result with a measured arm, a failed one and one that did not run.
// sampleRun is a measured run of four seconds: two in violation of 50 ms, one resize.
func sampleRun(t *testing.T) *Measured {
	t.Helper()
	rep := &loadgen.Report{Start: time.Unix(0, 0), Seconds: []loadgen.Second{
		{Second: 0, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.02},
		{Second: 1, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.08},
		{Second: 2, OfferedRate: 20, Offered: 20, Achieved: 20, P99Seconds: 0.03},
		{Second: 3, OfferedRate: 20, Offered: 20, Achieved: 19, Errors: 1, P99Seconds: 0.03},
	}}
	rep.Summary.Requests, rep.Summary.Errors, rep.Summary.P99Seconds = 60, 1, 0.08
	points := []Point{ // out of order: Measure sorts them
		pt(2, 2, 0.5, map[string]float64{"a": 10.5, "b": 0.5}),
		pt(0, 1, 0.5, map[string]float64{"a": 10}),
		pt(4, 2, 0.5, map[string]float64{"a": 11, "b": 1}),
	}
	return Measure(rep, points, 0.05)
}

func TestMeasure(t *testing.T) {
	m := sampleRun(t)
	if m.ViolationSeconds != 2 || m.Resizes != 1 || math.Abs(m.CPUSeconds-2) > 1e-9 {
		t.Errorf("measured %d violation seconds, %d resizes, %v CPU-seconds; want 2, 1, 2", m.ViolationSeconds, m.Resizes, m.CPUSeconds)
	}
	if m.Size[0].T != 0 || m.Size[1].CPUUsed != 0.5 || m.Decisions[0].T != 2 {
		t.Errorf("series: %+v, decisions %+v", m.Size, m.Decisions)
	}
}

// TestSave checks the files a run is saved as: the JSON with the measurements and the series
// (never the pods' raw counters) and a PNG of one row of three charts.
func TestSave(t *testing.T) {
	dir := t.TempDir()
	m := sampleRun(t)
	if err := Save(dir, "run", m, func(w io.Writer) error { return m.PNG(w, "test", 0.05) }); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("run.json: %v\n%s", err, data)
	}
	for key, want := range map[string]string{"violationSeconds": "2", "cpuSeconds": "2", "resizes": "1"} {
		if got := string(doc[key]); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	for _, key := range []string{"load", "size", "decisions", "p99Seconds", "requests", "errors"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("run.json has no %s", key)
		}
	}
	if strings.Contains(string(data), "usage") {
		t.Error("the pods' raw counters leak into the JSON")
	}
	f, err := os.Open(filepath.Join(dir, "run.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != RowWidth || img.Bounds().Dy() != RowHeight {
		t.Errorf("run.png is %v, want one row of %d × %d", img.Bounds(), RowWidth, RowHeight)
	}
	if err := (&Measured{}).PNG(io.Discard, "empty", 0.05); err == nil {
		t.Error("a run without a load series was drawn")
	}
}

func TestParseCPUStat(t *testing.T) {
	got, err := parseCPUStat("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	if err != nil || got != 2.5 {
		t.Errorf("parseCPUStat = %v, %v; want 2.5", got, err)
	}
	for _, bad := range []string{"", "user_usec 1\n", "usage_usec x\n"} {
		if _, err := parseCPUStat(bad); err == nil {
			t.Errorf("parseCPUStat(%q) accepted", bad)
		}
	}
}
