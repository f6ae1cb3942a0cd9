package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readTestTrace(t *testing.T, name string) []Job {
	t.Helper()
	path := filepath.Join("..", "..", "simulator", "testdata", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := DecodeTrace(data, path)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// zeroModel stretches nothing: every factor is 1, so timelines are exact.
func zeroModel() Model { return Model{} }

func strategy(t *testing.T, name string) Strategy {
	t.Helper()
	s, err := SelectStrategies([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return s[0]
}

func smallMachineOptions(t *testing.T, nodes, reserved int, m Model) Options {
	t.Helper()
	topo, _, err := LoadMachine("synthetic:2x1x1x4x1")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Machine: topo, Nodes: nodes, Model: m, Queue: DefaultQueueOptions(), SnapshotTTL: DefaultSnapshotTTL,
		SystemReservedCPUs: reserved, Verify: true}
}

type timeline struct {
	Start, End float64
	Nodes      int
}

func timelines(r *Result) map[string]timeline {
	out := map[string]timeline{}
	for _, j := range r.Jobs {
		out[j.Name] = timeline{Start: j.Start, End: j.End, Nodes: j.Nodes}
	}
	return out
}

// TestEndToEndTimeline replays testdata/e2e-4jobs.yaml on two nodes of 2 NUMA nodes × 4 CPUs
// (7 allocatable CPUs each, one system-reserved) with a model that slows nothing, so the
// timeline follows from placement and queueing alone:
//
//	a (4 CPUs) starts at 0 on node-001 NUMA 0, ends at 100;
//	b (4 CPUs) starts at 10 on node-002 (least loaded), ends at 60;
//	c (2 workers × 3) starts at 20, one worker on each node's NUMA 1, ends at 50;
//	d (2 workers × 4) arrives at 30 and fits nowhere: at 50 (c ended) no NUMA node offers 4
//	  CPUs with the shared pool's minimum kept; at 60 (b ended) node-002 takes one worker but its
//	  7 allocatable CPUs refuse the second, and node-001 NUMA 1 offers only 3; at 100 (a ended,
//	  the queue retries it at once since its last try was more than ChangeDelay ago) it starts
//	  on both nodes and ends at 140.
//
// Default Kubernetes gives the same timeline here: the same node totals block d.
func TestEndToEndTimeline(t *testing.T) {
	jobs := readTestTrace(t, "e2e-4jobs.yaml")
	want := map[string]timeline{
		"a": {0, 100, 1}, "b": {10, 60, 1}, "c": {20, 50, 2}, "d": {100, 140, 2},
	}
	for _, name := range []string{StrategyFinegrain, StrategyKube, StrategyKubeStatic} {
		r, err := Simulate(jobs, strategy(t, name), smallMachineOptions(t, 2, 1, zeroModel()))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, timelines(r)); diff != "" {
			t.Errorf("%s timeline (-want +got):\n%s", name, diff)
		}
		s := r.Summary
		if s.Finished != 4 || s.Makespan != 140 || s.Response.Mean != 72.5 || s.Wait.Mean != 17.5 || s.Stretch != 1 {
			t.Errorf("%s summary: %+v", name, s)
		}
		if wantUtil := (4*100 + 4*50 + 6*30 + 8*40) / (16 * 140.0); math.Abs(s.Utilisation-wantUtil) > 1e-12 {
			t.Errorf("%s utilisation %v, want %v", name, s.Utilisation, wantUtil)
		}
	}
}

// TestEndToEndModel runs job a alone under the default model: pinned on one NUMA node it runs
// at its base runtime; floating over the node (default Kubernetes) it is stretched by remote
// memory (1 + 0.1 × 0.5 × 0.8), interference (4 busy threads in an 8-CPU pool: 1 + 0.1 × 0.5)
// and ranks talking across NUMA nodes (2 + 2 tasks: 8 of 12 pairs, 1 + 0.02 × 8/12 × 0.3).
func TestEndToEndModel(t *testing.T) {
	jobs := readTestTrace(t, "e2e-4jobs.yaml")[:1]
	want := map[string]float64{
		StrategyFinegrain: 100,
		StrategyKube:      100 * 1.04 * 1.05 * (1 + 0.02*8.0/12*0.3),
	}
	for name, end := range want {
		r, err := Simulate(jobs, strategy(t, name), smallMachineOptions(t, 2, 1, DefaultModel()))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Jobs[0].End; math.Abs(got-end) > 1e-6 {
			t.Errorf("%s: job a ends at %v, want %v", name, got, end)
		}
	}
}

// TestAgentRefusal: the placer and the node agent agree on what a node can pin. With no CPU
// system-reserved, a 2 × 4-CPU node's NUMA nodes each offer 4 CPUs, but the agent keeps one CPU
// in the shared pool across both and publishes that exclusive requests can take 7 in all
// (finegrain.dev/exclusive-available). The placer used to add the zones up and split an 8-task
// network job into two 4-CPU workers there, and the agent refused the second; now it sees that 8
// pinned CPUs never fit the node, and the job is rejected with the placer's reason, no agent
// refusal. With one CPU system-reserved on two nodes the job runs on both. A loaded workload
// with nothing reserved meets no refusal either.
func TestAgentRefusal(t *testing.T) {
	jobs := []Job{{Name: "net", Runtime: 10e9, Spec: readTestTrace(t, "e2e-4jobs.yaml")[3].Spec}}
	jobs[0].Spec.Profile, jobs[0].Spec.Granularity = "network", "scale"
	r, err := Simulate(jobs, strategy(t, StrategyFinegrain), smallMachineOptions(t, 1, 0, zeroModel()))
	if err != nil {
		t.Fatal(err)
	}
	j := r.Jobs[0]
	if r.Summary.AgentRefusals != 0 || j.AgentRefusals != 0 || !strings.Contains(j.Rejected, "network job fits neither one worker") ||
		!strings.Contains(j.Rejected, "even on an idle cluster") {
		t.Errorf("refusals %d, job %+v", r.Summary.AgentRefusals, j)
	}
	r, err = Simulate(jobs, strategy(t, StrategyFinegrain), smallMachineOptions(t, 2, 1, zeroModel()))
	if err != nil {
		t.Fatal(err)
	}
	if j := r.Jobs[0]; r.Summary.AgentRefusals != 0 || j.Rejected != "" || j.Nodes != 2 || j.Workers != 2 {
		t.Errorf("with a reserved CPU: refusals %d, job %+v", r.Summary.AgentRefusals, j)
	}
	o := paperOptions(t, 3)
	o.SystemReservedCPUs, o.Verify = 0, true
	r, err = Simulate(generated(t, 60, 3*72, 3, 0.9), strategy(t, StrategyFinegrain), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.AgentRefusals != 0 {
		t.Errorf("with nothing reserved, %d plans refused by an allocator", r.Summary.AgentRefusals)
	}
}
