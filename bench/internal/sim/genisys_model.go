package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The Genisys experiment (issue 18, experiment 3): HPC job steps and data-centre services with
// latency targets on five nodes, under the thesis's scenarios — Slurm and kube-scheduler unaware
// of each other (Unmanaged), whole nodes or each node's CPUs split between them (Partitioned,
// Thread-partitioned), and finegrain, whose placer binds the steps and whose objective law sizes
// the services. docs/experiments.md documents the model and what of it is our reading of the
// thesis.

// Genisys cluster: five nodes of 2 sockets × 8 cores (16 CPUs, no SMT), nothing reserved.
const (
	GenisysNodes   = 5
	GenisysMachine = "synthetic:2x1x1x8x1"
	// genisysPeriod is the objective law's period (ServiceObjective's default) and the
	// utilisation samples' spacing; genisysTick the simulation's time step.
	genisysPeriod = 10 * time.Second
	genisysTick   = time.Second
	// genisysWarmup is how long the services run alone before the first HPC job is submitted.
	genisysWarmup = 120 * time.Second
	// maxUtilisation caps a service's CPU utilisation in the latency model: an overloaded
	// service's latency is finite (100 × its work), so the law sees how far it is from its target.
	maxUtilisation = 0.99
)

// GenisysService is one data-centre service: a request stream whose rate follows a sine around
// its mean, each request Work CPU-seconds, and a latency target.
type GenisysService struct {
	Name string
	// MeanRate is the mean request rate (per second); the rate swings by Amplitude (0 to 1) of it
	// with the given Period and Phase (radians).
	MeanRate, Amplitude float64
	Period              time.Duration
	Phase               float64
	// Work is the CPU-seconds one request needs; Target the latency (seconds) it must stay at or
	// below.
	Work, Target float64
	// MaxPodCPUMilli and MaxReplicas bound the objective's size (pods of 1 core at least).
	MaxPodCPUMilli int64
	MaxReplicas    int32
}

// Rate is the request rate at t seconds.
func (s *GenisysService) Rate(t float64) float64 {
	return s.MeanRate * (1 + s.Amplitude*math.Sin(2*math.Pi*t/s.Period.Seconds()+s.Phase))
}

// TargetUtilisation is the CPU utilisation at which the latency equals the target.
func (s *GenisysService) TargetUtilisation() float64 { return 1 - s.Work/s.Target }

// ProvisionedMilli is the CPU a static deployment gives the service: enough to meet the target
// at its peak rate, in whole cores.
func (s *GenisysService) ProvisionedMilli() int64 {
	peak := s.MeanRate * (1 + s.Amplitude) * s.Work
	return 1000 * int64(math.Ceil(peak/s.TargetUtilisation()-1e-9))
}

// ServiceLatency is the mean response time of requests of work CPU-seconds arriving at rate per
// second on capacity cores: an M/M/1 processor-sharing queue whose server has the service's CPU,
// work/(1 − ρ) at utilisation ρ = rate × work / capacity, ρ capped at maxUtilisation (no
// capacity at all counts as that cap).
func ServiceLatency(work, rate, capacity float64) float64 {
	rho := maxUtilisation
	if capacity > 0 {
		rho = min(rate*work/capacity, maxUtilisation)
	}
	return work / (1 - rho)
}

// GenisysStep is one step (an srun) of an HPC job: Tasks ranks of one CPU each, running Runtime
// on a dedicated cluster.
type GenisysStep struct {
	Name    string
	Tasks   int
	Runtime time.Duration
}

// GenisysJob is an HPC job: its steps run one after the other, the first submitted at Submit.
type GenisysJob struct {
	Name   string
	Submit time.Duration
	Steps  []GenisysStep
}

// GenisysWorkload is one of the thesis's workloads.
type GenisysWorkload struct {
	Name     string
	Services []GenisysService
	Jobs     []GenisysJob
}

// Steps counts the workload's steps.
func (w *GenisysWorkload) Steps() int {
	n := 0
	for _, j := range w.Jobs {
		n += len(j.Steps)
	}
	return n
}

// genisysShape is a workload's size (the thesis names pilot, small and large; the sizes are
// ours, docs/experiments.md): how many services and jobs, steps per job, the task counts a step
// draws from, its runtime range and the window the jobs are submitted in after the warm-up.
type genisysShape struct {
	services, jobs, steps int
	tasks                 []int
	minRuntime, maxRun    time.Duration
	window                time.Duration
}

// GenisysWorkloads are the workloads' names, smallest first.
var GenisysWorkloads = []string{"pilot", "small", "large"}

var genisysShapes = map[string]genisysShape{
	"pilot": {services: 1, jobs: 1, steps: 3, tasks: []int{16}, minRuntime: 300 * time.Second, maxRun: 300 * time.Second},
	"small": {services: 2, jobs: 4, steps: 3, tasks: []int{8, 16, 24, 32}, minRuntime: 200 * time.Second, maxRun: 600 * time.Second, window: 600 * time.Second},
	"large": {services: 4, jobs: 10, steps: 4, tasks: []int{8, 16, 24, 32}, minRuntime: 300 * time.Second, maxRun: 900 * time.Second, window: 1800 * time.Second},
}

// Services' shape: 10 ms of CPU per request, a 25 ms latency target (the target is met up to
// 60 % utilisation), a mean of 2 to 4 cores' worth of requests swinging by 60 % over 30 minutes,
// pods of 1 to 4 cores, 1 to 8 of them.
const (
	genisysWork          = 0.010
	genisysTarget        = 0.025
	genisysMinCores      = 2.0
	genisysMaxCores      = 4.0
	genisysAmplitude     = 0.6
	genisysServicePeriod = 1800 * time.Second
	genisysMaxPodMilli   = 4000
	genisysMaxReplicas   = 8
)

// GenisysWorkloadOf draws the named workload from seed: every service's mean load and phase,
// every job's submission time (uniform in the shape's window, after the warm-up) and its steps'
// task counts and runtimes (uniform over the shape's choices, whole seconds). The same name and
// seed always give the same workload.
func GenisysWorkloadOf(name string, seed uint64) (GenisysWorkload, error) {
	shape, ok := genisysShapes[name]
	if !ok {
		return GenisysWorkload{}, fmt.Errorf("genisys workload %q: want one of %v", name, GenisysWorkloads)
	}
	rng := rand.New(rand.NewPCG(seed, seed^genSeedStreamConst))
	w := GenisysWorkload{Name: name}
	for i := range shape.services {
		cores := genisysMinCores + rng.Float64()*(genisysMaxCores-genisysMinCores)
		w.Services = append(w.Services, GenisysService{
			Name: fmt.Sprintf("service-%d", i+1), MeanRate: math.Round(cores / genisysWork), Amplitude: genisysAmplitude,
			Period: genisysServicePeriod, Phase: math.Round(rng.Float64()*2*math.Pi*100) / 100,
			Work: genisysWork, Target: genisysTarget, MaxPodCPUMilli: genisysMaxPodMilli, MaxReplicas: genisysMaxReplicas,
		})
	}
	for j := range shape.jobs {
		job := GenisysJob{Name: fmt.Sprintf("job-%d", j+1), Submit: genisysWarmup}
		if shape.window > 0 {
			job.Submit += time.Duration(rng.IntN(int(shape.window/time.Second)+1)) * time.Second
		}
		for k := range shape.steps {
			span := int((shape.maxRun - shape.minRuntime) / time.Second)
			job.Steps = append(job.Steps, GenisysStep{
				Name:    fmt.Sprintf("%s-step-%d", job.Name, k+1),
				Tasks:   shape.tasks[rng.IntN(len(shape.tasks))],
				Runtime: shape.minRuntime + time.Duration(rng.IntN(span+1))*time.Second,
			})
		}
		w.Jobs = append(w.Jobs, job)
	}
	// Jobs in submission order (equal times keep their draw order).
	slices.SortStableFunc(w.Jobs, func(a, b GenisysJob) int { return cmp.Compare(a.Submit, b.Submit) })
	return w, nil
}
