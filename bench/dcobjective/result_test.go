package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

// sampleResult is a result with a measured arm, a failed one and one that did not run.
func sampleResult(t *testing.T) *Result {
	t.Helper()
	trace, err := loadgen.ParseTrace("2s@10,2s@20")
	if err != nil {
		t.Fatal(err)
	}
	size := []servicerun.Point{{T: 0, Replicas: 1, PodCPU: 0.5, Granted: 0.5}, {T: 2, Replicas: 2, PodCPU: 0.5, Granted: 1}}
	return &Result{
		Setup: Setup{Trace: trace, TargetSeconds: 0.05},
		None: &Arm{Measured: &servicerun.Measured{
			ViolationSeconds: 2, CPUSeconds: 2, Resizes: 1, Requests: 60, Errors: 1, P99Seconds: 0.08,
			Load: []loadgen.Second{
				{Second: 0, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.02},
				{Second: 1, OfferedRate: 10, Offered: 10, Achieved: 10, P99Seconds: 0.08},
			},
			Size: size, Decisions: size[1:],
		}},
		Finegrain: &Arm{Error: "the placer's ServiceObjective loop has not adopted objective x/web"},
	}
}

// TestResultJSON checks the contract of result.json: an object per arm that ran, with
// violationSeconds, cpuSeconds and resizes when it was measured and only error when it failed.
func TestResultJSON(t *testing.T) {
	dir := t.TempDir()
	if err := writeResult(dir, sampleResult(t)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("result.json is not an object of objects: %v\n%s", err, data)
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
	if _, err := os.Stat(filepath.Join(dir, "result.png")); err != nil {
		t.Error(err)
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
	if o.cgroupRoots["node-2"] != "finegrain-nodes/node-2" || !slices.Equal(o.arms, []string{"hpa", "none"}) || o.trace.Duration() != 280*time.Second || o.stabilize != time.Minute {
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
		{"-cgroup-roots", "n=/", "-scale-down-stabilization", "0s"},
		{"-cgroup-roots", "n=/", "-scale-down-stabilization", "1500ms"}, // not whole seconds
		{"-cgroup-roots", "n=/", "-scale-down-stabilization", "2h"},     // past the HPA's limit
	} {
		if _, err := parse(bad, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
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
