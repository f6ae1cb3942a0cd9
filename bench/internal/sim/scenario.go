package sim

import (
	"fmt"
	"sync"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Scenario is one cluster and one workload, replayed under several strategies.
type Scenario struct {
	// Machine names the node type in reports; Workload describes where the jobs came from.
	Machine, Workload string
	Options           Options
	Jobs              []Job
	Strategies        []Strategy
	// Baseline names the strategy the ratios compare with; it must be among Strategies.
	Baseline string
}

// ScenarioResult is a scenario's outcome, one entry per strategy in the order they were given.
type ScenarioResult struct {
	Machine  string `json:"machine"`
	Nodes    int    `json:"nodes"`
	CPUs     int    `json:"cpus"`
	Jobs     int    `json:"jobs"`
	Workload string `json:"workload"`
	Baseline string `json:"baseline"`
	// Model is the runtime model the scenario ran with.
	Model      Model            `json:"model"`
	Strategies []StrategyResult `json:"strategies"`
	// Results hold every job's outcome, by strategy, for callers that want them.
	Results []*Result `json:"-"`
}

// StrategyResult is one strategy's summary and its ratios to the baseline.
type StrategyResult struct {
	Strategy string `json:"strategy"`
	Summary
	// ResponseByProfile and StretchByProfile are the mean response time and the mean stretch
	// (run time over base runtime) of the finished jobs of each profile.
	ResponseByProfile map[v1alpha1.Profile]float64 `json:"responseByProfile"`
	StretchByProfile  map[v1alpha1.Profile]float64 `json:"stretchByProfile"`
	// ResponseRatio and MakespanRatio divide this strategy's mean response time and makespan by
	// the baseline's (1 for the baseline itself; 0 when the baseline finished nothing).
	ResponseRatio float64 `json:"responseRatio"`
	MakespanRatio float64 `json:"makespanRatio"`
}

// Run simulates every strategy of the scenario, up to parallel at a time (each simulation is
// independent and deterministic, so the results do not depend on parallel).
func (sc *Scenario) Run(parallel int) (*ScenarioResult, error) {
	base := -1
	for i, s := range sc.Strategies {
		if s.Name == sc.Baseline {
			base = i
		}
	}
	if base < 0 {
		return nil, fmt.Errorf("baseline strategy %q is not among the strategies run", sc.Baseline)
	}
	results := make([]*Result, len(sc.Strategies))
	errs := make([]error, len(sc.Strategies))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, s := range sc.Strategies {
		jobs := cloneJobs(sc.Jobs)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i], errs[i] = Simulate(jobs, s, sc.Options)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := &ScenarioResult{
		Machine: sc.Machine, Nodes: sc.Options.Nodes, CPUs: sc.Options.Nodes * sc.Options.Machine.NumCPUs(),
		Jobs: len(sc.Jobs), Workload: sc.Workload, Baseline: sc.Baseline, Model: sc.Options.Model, Results: results,
	}
	b := results[base].Summary
	for _, r := range results {
		sr := StrategyResult{Strategy: r.Strategy, Summary: r.Summary,
			ResponseByProfile: byProfile(r, func(j *JobResult) float64 { return j.End - j.Submit }),
			StretchByProfile:  byProfile(r, func(j *JobResult) float64 { return j.Stretch })}
		if b.Response.Mean > 0 {
			sr.ResponseRatio = r.Summary.Response.Mean / b.Response.Mean
		}
		if b.Makespan > 0 {
			sr.MakespanRatio = r.Summary.Makespan / b.Makespan
		}
		out.Strategies = append(out.Strategies, sr)
	}
	return out, nil
}

// byProfile averages value over the finished jobs of each profile.
func byProfile(r *Result, value func(*JobResult) float64) map[v1alpha1.Profile]float64 {
	sum := map[v1alpha1.Profile]float64{}
	n := map[v1alpha1.Profile]int{}
	for i := range r.Jobs {
		if j := &r.Jobs[i]; j.Rejected == "" {
			sum[j.Profile] += value(j)
			n[j.Profile]++
		}
	}
	out := map[v1alpha1.Profile]float64{}
	for _, p := range genProfiles {
		if n[p] > 0 {
			out[p] = sum[p] / float64(n[p])
		}
	}
	return out
}

// cloneJobs deep-copies jobs so concurrent simulations share no resource.Quantity (whose
// String caches into the value).
func cloneJobs(jobs []Job) []Job {
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		j.Spec.TaskResources.CPU = j.Spec.TaskResources.CPU.DeepCopy()
		j.Spec.TaskResources.Memory = j.Spec.TaskResources.Memory.DeepCopy()
		out[i] = j
	}
	return out
}
