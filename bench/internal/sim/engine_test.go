package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func generated(t testing.TB, jobs, cpus int, seed uint64, load float64) []Job {
	t.Helper()
	out, err := Generate(GenOptions{Jobs: jobs, Seed: seed, Load: load, ClusterCPUs: cpus, Mix: DefaultMix})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func paperOptions(t testing.TB, nodes int) Options {
	return Options{Machine: paperMachine(t), Nodes: nodes, Model: DefaultModel(), Queue: DefaultQueueOptions(),
		SnapshotTTL: DefaultSnapshotTTL, SystemReservedCPUs: 1}
}

// TestEveryStrategyKeepsInvariants runs a loaded workload under every strategy, checking after
// every event every allocator's invariants (no CPU in two pools or two pins, whole NUMA nodes),
// that the allocators hold exactly the bound workers' CPUs, that requests stay within
// allocatable, and that no job runs twice or sits in the queue while running; at the end every
// job has finished or been rejected (Simulate fails otherwise), once, in order.
func TestEveryStrategyKeepsInvariants(t *testing.T) {
	jobs := generated(t, 60, 3*72, 3, 0.9)
	for _, s := range Strategies() {
		t.Run(s.Name, func(t *testing.T) {
			o := paperOptions(t, 3)
			o.Verify = true
			r, err := Simulate(jobs, s, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Summary.Finished+r.Summary.Rejected != len(jobs) || r.Summary.Finished == 0 {
				t.Fatalf("finished %d + rejected %d of %d jobs", r.Summary.Finished, r.Summary.Rejected, len(jobs))
			}
			for _, j := range r.Jobs {
				if j.Rejected != "" {
					continue
				}
				if j.Start < j.Submit || j.End <= j.Start || j.Stretch < 1-1e-9 || j.Workers < 1 || j.Nodes < 1 {
					t.Errorf("job %s: %+v", j.Name, j)
				}
			}
			if r.Summary.AgentRefusals != 0 {
				t.Errorf("%d plans refused by an allocator", r.Summary.AgentRefusals)
			}
		})
	}
}

// TestDeterministic: one seed gives the same results, simulation by simulation and whatever the
// number of simulations running at once; another seed gives others.
func TestDeterministic(t *testing.T) {
	jobs := generated(t, 80, 4*72, 11, 0.7)
	sc := &Scenario{Jobs: jobs, Strategies: Strategies()[:6], Baseline: StrategyKube, Options: paperOptions(t, 4)}
	one, err := sc.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	three, err := sc.Run(3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range one.Results {
		if diff := cmp.Diff(one.Results[i].Jobs, three.Results[i].Jobs); diff != "" {
			t.Errorf("%s differs between runs (-first +second):\n%s", one.Results[i].Strategy, diff)
		}
	}
	if diff := cmp.Diff(one.Strategies, three.Strategies); diff != "" {
		t.Errorf("summaries differ:\n%s", diff)
	}
	sc.Jobs = generated(t, 80, 4*72, 12, 0.7)
	other, err := sc.Run(2)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(one.Strategies, other.Strategies) {
		t.Error("seeds 11 and 12 give the same results")
	}
}

// TestPriorityOrdersSimultaneousArrivals: of two jobs arriving together that cannot run at
// once, the higher priority one starts first although it comes second in the trace.
func TestPriorityOrdersSimultaneousArrivals(t *testing.T) {
	base := readTestTrace(t, "e2e-4jobs.yaml")[0]
	low, high := base, base
	low.Name, high.Name = "low", "high"
	low.Runtime, high.Runtime = 50*time.Second, 50*time.Second
	high.Spec.Priority = ptr.To[int32](5)
	for _, name := range []string{StrategyFinegrain, StrategyKube} {
		r, err := Simulate([]Job{low, high}, strategy(t, name), smallMachineOptions(t, 1, 1, zeroModel()))
		if err != nil {
			t.Fatal(err)
		}
		got := timelines(r)
		if got["high"].Start != 0 || got["low"].Start != 50 {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

// TestRejectsJobsThatNeverFit: a worker larger than any NUMA node is rejected by the placer on
// the empty cluster (with the placer's reason); a container larger than any node is rejected
// by the Kubernetes model; the other jobs run.
func TestRejectsJobsThatNeverFit(t *testing.T) {
	jobs := readTestTrace(t, "e2e-4jobs.yaml")
	big := jobs[0]
	big.Name, big.Arrival = "big", 5*time.Second
	big.Spec.Tasks, big.Spec.Workers = 6, 1
	jobs = append(jobs[:1], append([]Job{big}, jobs[1:]...)...)
	r, err := Simulate(jobs, strategy(t, StrategyFinegrain), smallMachineOptions(t, 2, 1, zeroModel()))
	if err != nil {
		t.Fatal(err)
	}
	if j := r.Jobs[1]; j.Name != "big" || !strings.Contains(j.Rejected, "fits none") || r.Summary.Finished != 4 {
		t.Errorf("finegrain: %+v, summary %+v", j, r.Summary)
	}
	huge := big
	huge.Name = "huge"
	huge.Spec.Tasks, huge.Spec.Workers = 8, 1
	r, err = Simulate([]Job{huge}, strategy(t, StrategyKube), smallMachineOptions(t, 2, 1, zeroModel()))
	if err != nil {
		t.Fatal(err)
	}
	if j := r.Jobs[0]; !strings.Contains(j.Rejected, "larger than any node's allocatable (7 CPUs") || j.End != 5 {
		t.Errorf("k8s: %+v", j)
	}
}

// TestStrategyOverridesInvalidSpec: a job whose spec the strategy makes invalid (granularity
// over more tasks than a job may have workers) is rejected at once with the validation error.
func TestStrategyOverridesInvalidSpec(t *testing.T) {
	j := readTestTrace(t, "e2e-4jobs.yaml")[0]
	j.Spec.Tasks = v1alpha1.MaxWorkers + 1
	r, err := Simulate([]Job{j}, strategy(t, "finegrain-granularity-least"), smallMachineOptions(t, 1, 1, zeroModel()))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Jobs[0].Rejected; !strings.Contains(got, "under strategy finegrain-granularity-least") || !strings.Contains(got, "spec.tasks") {
		t.Errorf("rejected %q", got)
	}
}

func TestCalendarOrder(t *testing.T) {
	var c calendar
	r := &run{}
	c.add(event{at: 5, kind: evWake})
	c.add(event{at: 5, kind: evArrival, run: r})
	c.add(event{at: 3, kind: evWake})
	c.add(event{at: 5, kind: evFinish, version: 1})
	c.add(event{at: 5, kind: evArrival})
	c.add(event{at: 5, kind: evFinish, version: 2})
	var got []event
	for c.Len() > 0 {
		got = append(got, c.next())
	}
	order := []struct {
		at   time.Duration
		kind eventKind
		seq  uint64
	}{{3, evWake, 2}, {5, evFinish, 3}, {5, evFinish, 5}, {5, evArrival, 1}, {5, evArrival, 4}, {5, evWake, 0}}
	for i, w := range order {
		if got[i].at != w.at || got[i].kind != w.kind || got[i].seq != w.seq {
			t.Errorf("event %d: %+v, want %+v", i, got[i], w)
		}
	}
}

func TestSimulateRejectsBadOptions(t *testing.T) {
	jobs := readTestTrace(t, "e2e-4jobs.yaml")
	o := smallMachineOptions(t, 1, 8, zeroModel())
	if _, err := Simulate(jobs, strategy(t, StrategyKube), o); err == nil || !strings.Contains(err.Error(), "8 system-reserved CPUs") {
		t.Errorf("all CPUs reserved: %v", err)
	}
	o = smallMachineOptions(t, 1, 1, zeroModel())
	o.Model.RemoteMemoryPenalty = -1
	if _, err := Simulate(jobs, strategy(t, StrategyKube), o); err == nil || !strings.Contains(err.Error(), "remoteMemoryPenalty") {
		t.Errorf("bad model: %v", err)
	}
	o.Machine = nil
	if _, err := Simulate(jobs, strategy(t, StrategyKube), o); err == nil {
		t.Error("no machine accepted")
	}
}
