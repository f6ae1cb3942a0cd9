package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/loadgen"
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
func sampleResult(t *testing.T) *Result {
	t.Helper()
	trace, err := loadgen.ParseTrace("2s@10,2s@20")
	if err != nil {
		t.Fatal(err)
	}
	rep := &loadgen.Report{Start: time.Unix(0, 0), Seconds: []loadgen.Second{
		{Second: 0, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.02},
		{Second: 1, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.08},
		{Second: 2, OfferedRate: 20, Offered: 20, Achieved: 20, P99Seconds: 0.03},
		{Second: 3, OfferedRate: 20, Offered: 20, Achieved: 19, Errors: 1, P99Seconds: 0.03},
	}}
	rep.Summary.Requests, rep.Summary.Errors, rep.Summary.P99Seconds = 60, 1, 0.08
	points := []Point{ // out of order: measure sorts them
		pt(2, 2, 0.5, map[string]float64{"a": 10.5, "b": 0.5}),
		pt(0, 1, 0.5, map[string]float64{"a": 10}),
		pt(4, 2, 0.5, map[string]float64{"a": 11, "b": 1}),
	}
	return &Result{
		Setup:     Setup{Trace: trace, TargetSeconds: 0.05},
		None:      &Arm{Measured: measure(rep, points, 0.05)},
		Finegrain: &Arm{Error: "the placer's ServiceObjective loop has not adopted objective x/web"},
	}
}

func TestMeasure(t *testing.T) {
	m := sampleResult(t).None.Measured
	if m.ViolationSeconds != 2 || m.Resizes != 1 || math.Abs(m.CPUSeconds-2) > 1e-9 {
		t.Errorf("measured %d violation seconds, %d resizes, %v CPU-seconds; want 2, 1, 2", m.ViolationSeconds, m.Resizes, m.CPUSeconds)
	}
	if m.Size[0].T != 0 || m.Size[1].CPUUsed != 0.5 || m.Decisions[0].T != 2 {
		t.Errorf("series: %+v, decisions %+v", m.Size, m.Decisions)
	}
}

// TestResultJSON checks the contract of result.json: an object per arm that ran, with
// violationSeconds, cpuSeconds and resizes when it was measured and only error when it failed.
func TestResultJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleResult(t).write(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("result.json is not an object of objects: %v\n%s", err, buf.String())
	}
	none := doc["none"]
	for key, want := range map[string]string{"violationSeconds": "2", "cpuSeconds": "2", "resizes": "1"} {
		if got := string(none[key]); got != want {
			t.Errorf("none.%s = %s, want %s", key, got, want)
		}
	}
	for _, key := range []string{"load", "size", "decisions", "p99Seconds", "requests", "errors"} {
		if _, ok := none[key]; !ok {
			t.Errorf("none has no %s", key)
		}
	}
	if _, ok := none["error"]; ok {
		t.Error("a measured arm has an error")
	}
	if fg := doc["finegrain"]; len(fg) != 1 || fg["error"] == nil {
		t.Errorf("a failed arm holds %v, want only its error", fg)
	}
	if _, ok := doc["hpa"]; ok {
		t.Error("an arm that did not run is in the result")
	}
	if string(doc["setup"]["targetP99Seconds"]) != "0.05" {
		t.Errorf("setup = %v", doc["setup"])
	}
	if strings.Contains(buf.String(), "usage") {
		t.Error("the pods' raw counters leak into the JSON")
	}
}

func TestPlot(t *testing.T) {
	for name, res := range map[string]*Result{"measured": sampleResult(t), "nothing measured": {}} {
		var buf bytes.Buffer
		if err := res.plot(&buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "measured" && img.Bounds().Dx() < 1000 {
			t.Errorf("%s: %v, want three panels", name, img.Bounds())
		}
	}
}

func TestParse(t *testing.T) {
	o, err := parse([]string{"-cgroup-roots", "node-1=/finegrain-nodes/node-1,node-2=/finegrain-nodes/node-2", "-arms", "hpa,none"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.cgroupRoots["node-2"] != "finegrain-nodes/node-2" || !slices.Equal(o.arms, []string{"hpa", "none"}) || o.trace.Duration() != 180*time.Second {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range [][]string{
		{},                                     // no -cgroup-roots
		{"-cgroup-roots", "node-1"},            // no =
		{"-cgroup-roots", "n=/a/../b"},         // a path out of the tree
		{"-cgroup-roots", "n=/", "-arms", "x"}, // no such arm
		{"-cgroup-roots", "n=/", "-arms", "none,none"},
		{"-cgroup-roots", "n=/", "-hpc-at", "10m"}, // past the trace
		{"-cgroup-roots", "n=/", "-pod-cpu", "1m"},
		{"-cgroup-roots", "n=/", "-max-pod-cpu", "100m"},
		{"-cgroup-roots", "n=/", "-trace", "10s"},
		{"-cgroup-roots", "n=/", "-max-replicas", "0"},
	} {
		if _, err := parse(bad, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
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

func TestChooseHPCNode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rooms []nodeRoom
		want  string
	}{
		{"the service's node with room, most pods first", []nodeRoom{
			{node: "a", freeMilli: 1500}, {node: "b", freeMilli: 1000, servicePods: 1}, {node: "c", freeMilli: 1100, servicePods: 2}}, "c"},
		{"no service node has room: a spare node", []nodeRoom{
			{node: "a", freeMilli: 980, servicePods: 2}, {node: "b", freeMilli: 1480}}, "b"},
		{"no room anywhere: the service's node, where the job waits", []nodeRoom{
			{node: "a", freeMilli: 500}, {node: "b", freeMilli: 980, servicePods: 1}}, "b"},
	} {
		got, ok := chooseHPCNode(tc.rooms)
		if !ok || got.node != tc.want {
			t.Errorf("%s: chose %q (%v), want %q", tc.name, got.node, ok, tc.want)
		}
	}
	if _, ok := chooseHPCNode([]nodeRoom{{node: "a", freeMilli: 2000}}); ok {
		t.Error("a node was chosen though none runs the service")
	}
}
