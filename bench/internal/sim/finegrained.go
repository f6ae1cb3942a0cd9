package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Strategies of the fine-grained scheduling paper's scenarios without task groups (CM_S, CM_G).
const (
	StrategyScaleNoTaskGroups       = "finegrain-scale-least-no-task-groups"
	StrategyGranularityNoTaskGroups = "finegrain-granularity-least-no-task-groups"
)

// FinegrainedScenario is one scenario of the fine-grained scheduling paper's Table II and the
// strategy that runs it.
type FinegrainedScenario struct {
	Name     string
	Strategy string
}

// FinegrainedScenarios are Table II's scenarios in the paper's order: NONE is default Kubernetes,
// CM the static CPU manager under the topology manager's best-effort policy, CM_S and CM_G the
// placer's scale and granularity strategies with task groups off, CM_S_TG and CM_G_TG with them
// on.
var FinegrainedScenarios = []FinegrainedScenario{
	{"NONE", StrategyKube},
	{"CM", StrategyKubeStaticBestEffort},
	{"CM_S", StrategyScaleNoTaskGroups},
	{"CM_G", StrategyGranularityNoTaskGroups},
	{"CM_S_TG", "finegrain-scale-least"},
	{"CM_G_TG", "finegrain-granularity-least"},
}

// The fine-grained scheduling experiments' cluster: four worker nodes (the fifth holds the
// control plane and the launchers) of 2 sockets × 18 cores, 4 CPUs reserved on each.
const (
	FinegrainedNodes    = 4
	FinegrainedReserved = 4
)

// Benchmark is one HPCC (or MiniFE) program as the experiments run it.
type Benchmark struct {
	Name    string
	Profile v1alpha1.Profile
	// MemoryPerTask is each rank's memory request.
	MemoryPerTask string
}

// Benchmarks are the programs of experiment 2 (experiment 1 runs the first alone). The profile is
// what each stresses: EP-DGEMM the cores, EP-STREAM and MiniFE (a conjugate-gradient solve on a
// sparse matrix) memory bandwidth, G-RandomRing and G-FFT (all-to-all) the network.
var Benchmarks = []Benchmark{
	{"ep-dgemm", v1alpha1.ProfileCPU, "1Gi"},
	{"ep-stream", v1alpha1.ProfileMemory, "2Gi"},
	{"g-randomring", v1alpha1.ProfileNetwork, "1Gi"},
	{"g-fft", v1alpha1.ProfileNetwork, "2Gi"},
	{"minife", v1alpha1.ProfileMemory, "2Gi"},
}

// The experiments' jobs: 16 ranks of one CPU each, a base runtime of 600 s (the paper gives
// neither the runtimes nor, for experiment 2, the rank counts: ours, docs/experiments.md).
const (
	finegrainedTasks   = 16
	finegrainedRuntime = 600 * time.Second
	// Experiment 1: 10 jobs 60 s apart. Experiment 2: 20 jobs at uniform random times in
	// 0–1,200 s.
	finegrained1Jobs   = 10
	finegrained1Gap    = 60 * time.Second
	finegrained2Jobs   = 20
	finegrained2Window = 1200 * time.Second
)

func benchmarkJob(b Benchmark, i int, at time.Duration) Job {
	j := Job{
		Name: fmt.Sprintf("%s-%d", b.Name, i+1), Arrival: at, Runtime: finegrainedRuntime,
		Spec: v1alpha1.HPCJobSpec{
			Tasks: finegrainedTasks, Profile: b.Profile, Placement: v1alpha1.LeastLoaded,
			TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse(b.MemoryPerTask)},
		},
	}
	v1alpha1.SetDefaults(&j.Spec)
	return j
}

// Finegrained1Jobs is experiment 1: 10 EP-DGEMM jobs of 16 ranks, 60 s apart.
func Finegrained1Jobs() []Job {
	jobs := make([]Job, finegrained1Jobs)
	for i := range jobs {
		jobs[i] = benchmarkJob(Benchmarks[0], i, time.Duration(i)*finegrained1Gap)
	}
	return jobs
}

// Finegrained2Jobs is experiment 2: 20 jobs, each a benchmark drawn uniformly, submitted at a
// uniform random whole second in 0–1,200 s, in submission order. The same seed always gives the
// same jobs.
func Finegrained2Jobs(seed uint64) []Job {
	rng := rand.New(rand.NewPCG(seed, seed^genSeedStreamConst))
	type draw struct {
		b  Benchmark
		at time.Duration
	}
	draws := make([]draw, finegrained2Jobs)
	for i := range draws {
		draws[i] = draw{Benchmarks[rng.IntN(len(Benchmarks))], time.Duration(rng.IntN(int(finegrained2Window/time.Second)+1)) * time.Second}
	}
	slices.SortStableFunc(draws, func(a, b draw) int { return int(a.at - b.at) })
	jobs := make([]Job, len(draws))
	for i, d := range draws {
		jobs[i] = benchmarkJob(d.b, i, d.at)
	}
	return jobs
}

// FinegrainedResult is one scenario's run.
type FinegrainedResult struct {
	Scenario string
	Strategy string
	// Metrics are the elastic experiment's figures with every job weighing 1 (these experiments
	// have no priorities: the weighted means are the plain ones, WeightedMeanCompletion is the
	// paper's "response time") and Utilization the CPU-seconds the jobs held over the worker
	// nodes' allocatable CPU-seconds in the total time.
	Metrics ElasticMetrics
	// Stretch is the mean run time over base runtime.
	Stretch float64
	Jobs    []JobResult
}

// FinegrainedReport is one experiment's run of every scenario.
type FinegrainedReport struct {
	Command, Experiment, Workload string
	Results                       []FinegrainedResult
}

// RunFinegrained replays jobs under every scenario of Table II on the experiments' cluster of
// machine nodes, with the default runtime model, parallel simulations at a time.
func RunFinegrained(jobs []Job, machine Options, parallel int) ([]FinegrainedResult, error) {
	all := Strategies()
	strategies := make([]Strategy, len(FinegrainedScenarios))
	for i, sc := range FinegrainedScenarios {
		k := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == sc.Strategy })
		if k < 0 {
			return nil, fmt.Errorf("scenario %s: no strategy %s", sc.Name, sc.Strategy)
		}
		strategies[i] = all[k]
	}
	sc := &Scenario{Jobs: jobs, Strategies: strategies, Baseline: StrategyKube, Options: machine}
	res, err := sc.Run(parallel)
	if err != nil {
		return nil, err
	}
	out := make([]FinegrainedResult, len(res.Results))
	for i, r := range res.Results {
		m, err := finegrainedMetrics(r, res.CPUs-machine.Nodes*machine.SystemReservedCPUs)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", FinegrainedScenarios[i].Name, err)
		}
		out[i] = FinegrainedResult{Scenario: FinegrainedScenarios[i].Name, Strategy: r.Strategy, Metrics: m, Stretch: r.Summary.Stretch, Jobs: r.Jobs}
	}
	return out, nil
}

func finegrainedMetrics(r *Result, cpus int) (ElasticMetrics, error) {
	var m ElasticMetrics
	if len(r.Jobs) == 0 {
		return m, fmt.Errorf("no jobs")
	}
	first, firstStart, last, held := r.Jobs[0].Submit, r.Jobs[0].Start, 0.0, 0.0
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if j.Rejected != "" {
			return m, fmt.Errorf("job %s never ran: %s", j.Name, j.Rejected)
		}
		first, firstStart, last = min(first, j.Submit), min(firstStart, j.Start), max(last, j.End)
		m.WeightedMeanResponse += j.Start - j.Submit
		m.WeightedMeanCompletion += j.End - j.Submit
		held += float64(j.CPUs) * (j.End - j.Start)
	}
	n := float64(len(r.Jobs))
	m.WeightedMeanResponse /= n
	m.WeightedMeanCompletion /= n
	m.OverallResponse = m.WeightedMeanResponse
	m.TotalTime, m.Makespan = last-first, last-firstStart
	if m.TotalTime > 0 && cpus > 0 {
		m.Utilization = held / (m.TotalTime * float64(cpus))
	}
	return m, nil
}

// WriteFinegrainedJSON writes one object per scenario (NONE, CM, …) with exactly the metrics'
// keys.
func WriteFinegrainedJSON(w io.Writer, r *FinegrainedReport) error {
	out := make(map[string]ElasticMetrics, len(r.Results))
	for _, res := range r.Results {
		out[res.Scenario] = res.Metrics
	}
	return writeIndentedJSON(w, out)
}

// WriteFinegrainedMarkdown writes the scenarios' table, with mean completion and makespan
// relative to NONE, and each job's start and end under each scenario.
func WriteFinegrainedMarkdown(w io.Writer, r *FinegrainedReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n### %s: %s\n\n", r.Command, r.Experiment, r.Workload)
	b.WriteString("| scenario | strategy | total time | utilisation | mean response (wait) | mean completion | vs NONE | makespan | vs NONE | stretch |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var base ElasticMetrics
	if len(r.Results) > 0 {
		base = r.Results[0].Metrics
	}
	rel := func(v, b float64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%+.1f %%", 100*(v/b-1))
	}
	for _, res := range r.Results {
		m := res.Metrics
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f %% | %s | %s | %s | %s | %s | %.3f |\n", res.Scenario, res.Strategy, secs(m.TotalTime), 100*m.Utilization,
			secs(m.WeightedMeanResponse), secs(m.WeightedMeanCompletion), rel(m.WeightedMeanCompletion, base.WeightedMeanCompletion),
			secs(m.Makespan), rel(m.Makespan, base.Makespan), res.Stretch)
	}
	b.WriteString("\nJobs (submit; start–end in seconds, nodes × workers):\n\n| job | submit |")
	for _, res := range r.Results {
		fmt.Fprintf(&b, " %s |", res.Scenario)
	}
	b.WriteString("\n|---|--:|" + strings.Repeat("---|", len(r.Results)) + "\n")
	if len(r.Results) > 0 {
		for i, j := range r.Results[0].Jobs {
			fmt.Fprintf(&b, "| %s | %.0f |", j.Name, j.Submit)
			for _, res := range r.Results {
				x := res.Jobs[i]
				fmt.Fprintf(&b, " %.0f–%.0f %d×%d |", x.Start, x.End, x.Nodes, x.Workers)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
