package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// GenOptions are the seeded generator's parameters; docs/simulator.md lists its distributions.
type GenOptions struct {
	Jobs int
	Seed uint64
	// Load is the offered load: arrival rate × mean(job CPUs × base runtime) / ClusterCPUs.
	Load float64
	// Batch submits every job at time 0 instead (Load is then ignored): the makespan measures
	// how fast a strategy drains a fixed workload.
	Batch bool
	// ClusterCPUs is the CPUs of the cluster the load refers to.
	ClusterCPUs int
	// Mix weighs cpu, memory and network jobs (any non-negative weights, not all zero).
	Mix [3]float64
}

// DefaultMix is an equal share of cpu-, memory- and network-bound jobs.
var DefaultMix = [3]float64{1, 1, 1}

// Generator distributions (docs/simulator.md, "Generated workloads").
var (
	genTasks         = []int32{4, 8, 16, 32}
	genMemoryPerTask = map[v1alpha1.Profile]string{
		v1alpha1.ProfileCPU: "1Gi", v1alpha1.ProfileMemory: "3Gi", v1alpha1.ProfileNetwork: "2Gi",
	}
	// genGranularity is the policy the generator gives each profile: one worker per task for
	// compute-bound jobs, one per node for memory-bound ones (more memory bandwidth); network jobs
	// are packed on one node by Algorithm 1 whatever they ask.
	genGranularity = map[v1alpha1.Profile]v1alpha1.Granularity{
		v1alpha1.ProfileCPU: v1alpha1.GranularityFine, v1alpha1.ProfileMemory: v1alpha1.GranularityScale,
		v1alpha1.ProfileNetwork: v1alpha1.GranularityScale,
	}
	genProfiles = []v1alpha1.Profile{v1alpha1.ProfileCPU, v1alpha1.ProfileMemory, v1alpha1.ProfileNetwork}
)

const (
	genRuntimeMedian   = 240 * time.Second
	genRuntimeSigma    = 0.5
	genRuntimeMin      = 30 * time.Second
	genRuntimeMax      = 1800 * time.Second
	genHighPriorityP   = 0.1
	genTasksPerWorker  = 16
	genHighPriority    = 1
	genSeedStreamConst = 0x9e3779b97f4a7c15
)

// Generate draws a workload: profile by Mix; tasks uniform over 4, 8, 16, 32; one CPU and 1, 3
// or 2 GiB per task (cpu, memory, network); base runtime log-normal (median 240 s, σ 0.5,
// clamped to 30 s – 30 min, whole seconds); priority 1 for one job in ten, else 0; the user's
// own worker count ceil(tasks/16); granularity by profile (cpu: granularity, memory and
// network: scale); least-loaded; Poisson arrivals at the rate that offers Load, or all at 0 with
// Batch. The same options always give the same jobs.
func Generate(o GenOptions) ([]Job, error) {
	switch {
	case o.Jobs < 1 || o.Jobs > MaxJobs:
		return nil, fmt.Errorf("generate: %d jobs, want 1 to %d", o.Jobs, MaxJobs)
	case !o.Batch && (!(o.Load > 0) || o.Load > 100):
		return nil, fmt.Errorf("generate: load %v, want more than 0 and at most 100", o.Load)
	case o.ClusterCPUs < 1:
		return nil, fmt.Errorf("generate: cluster of %d CPUs, want at least 1", o.ClusterCPUs)
	}
	total := 0.0
	for _, w := range o.Mix {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("generate: mix %v: weights must be finite and not negative", o.Mix)
		}
		total += w
	}
	if total == 0 {
		return nil, fmt.Errorf("generate: mix %v: at least one weight must be positive", o.Mix)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^genSeedStreamConst))
	jobs := make([]Job, o.Jobs)
	work := 0.0
	for i := range jobs {
		p := pickProfile(rng, o.Mix, total)
		tasks := genTasks[rng.IntN(len(genTasks))]
		rt := time.Duration(float64(genRuntimeMedian) * math.Exp(genRuntimeSigma*rng.NormFloat64()))
		rt = min(max(rt, genRuntimeMin), genRuntimeMax).Round(time.Second)
		prio := int32(0)
		if rng.Float64() < genHighPriorityP {
			prio = genHighPriority
		}
		jobs[i] = Job{
			Name:    fmt.Sprintf("%s-%d", p, i+1),
			Runtime: rt,
			Spec: v1alpha1.HPCJobSpec{
				Tasks: tasks, Profile: p, Granularity: genGranularity[p],
				Workers: (tasks + genTasksPerWorker - 1) / genTasksPerWorker,
				TaskResources: v1alpha1.TaskResources{
					CPU: resource.MustParse("1"), Memory: resource.MustParse(genMemoryPerTask[p]),
				},
				Priority: ptr.To(prio), Placement: v1alpha1.LeastLoaded,
			},
		}
		v1alpha1.SetDefaults(&jobs[i].Spec)
		work += float64(jobs[i].CPUs()) * rt.Seconds()
	}
	if o.Batch {
		return jobs, nil
	}
	rate := o.Load * float64(o.ClusterCPUs) / (work / float64(len(jobs)))
	at := 0.0
	for i := range jobs {
		if i > 0 {
			at += rng.ExpFloat64() / rate
		}
		if at > MaxDuration.Seconds() {
			return nil, fmt.Errorf("generate: job %d would arrive after %v; raise the load or generate fewer jobs", i+1, MaxDuration)
		}
		jobs[i].Arrival = time.Duration(at * float64(time.Second)).Round(time.Millisecond)
	}
	return jobs, nil
}

func pickProfile(rng *rand.Rand, mix [3]float64, total float64) v1alpha1.Profile {
	x := rng.Float64() * total
	for i, w := range mix {
		if x < w {
			return genProfiles[i]
		}
		x -= w
	}
	for i := len(mix) - 1; i >= 0; i-- {
		if mix[i] > 0 {
			return genProfiles[i]
		}
	}
	return genProfiles[0]
}
