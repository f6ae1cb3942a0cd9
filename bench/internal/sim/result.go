package sim

import (
	"math"
	"slices"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// JobResult is one job's outcome under one strategy. Times are seconds from the start of the
// simulation.
type JobResult struct {
	Name    string           `json:"name"`
	Profile v1alpha1.Profile `json:"profile"`
	CPUs    int              `json:"cpus"`
	Submit  float64          `json:"submit"`
	// Start and End are set for finished jobs; End is the rejection time for rejected ones.
	Start float64 `json:"start,omitempty"`
	End   float64 `json:"end"`
	// Runtime is the base runtime; Stretch is the measured runtime over it.
	Runtime float64 `json:"runtime"`
	Stretch float64 `json:"stretch,omitempty"`
	// Nodes and Workers are where the job ran.
	Nodes   int `json:"nodes,omitempty"`
	Workers int `json:"workers,omitempty"`
	// Factors are the runtime model's factors when the job started.
	Factors *Factors `json:"factors,omitempty"`
	// TimedOut is set when the job waited longer than its gang timeout at least once.
	TimedOut bool `json:"timedOut,omitempty"`
	// AgentRefusals counts this job's plans a node's allocator refused.
	AgentRefusals int `json:"agentRefusals,omitempty"`
	// Rejected says why the job could never be placed.
	Rejected string `json:"rejected,omitempty"`
}

// Result is one strategy's run.
type Result struct {
	Strategy string      `json:"strategy"`
	Jobs     []JobResult `json:"-"`
	Summary  Summary     `json:"summary"`
}

// Stats summarises a sample of durations in seconds.
type Stats struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// Summary is a strategy's figures over the jobs it finished.
type Summary struct {
	Finished int `json:"finished"`
	Rejected int `json:"rejected"`
	TimedOut int `json:"timedOut"`
	// Response is submit → finish, Wait submit → start, Run start → finish.
	Response Stats `json:"response"`
	Wait     Stats `json:"wait"`
	Run      Stats `json:"run"`
	// Stretch is the mean of run time over base runtime.
	Stretch float64 `json:"stretch"`
	// Makespan is first submit → last finish, in seconds.
	Makespan float64 `json:"makespan"`
	// Utilisation is the CPU-seconds held by running jobs over the cluster's CPU-seconds in the
	// makespan.
	Utilisation float64 `json:"utilisation"`
	// Events, Attempts and Plans count calendar events, queue attempts and calls into the
	// placement code; Plans include the runs of the real placer for finegrain strategies.
	Events   int `json:"events"`
	Attempts int `json:"attempts"`
	Plans    int `json:"plans"`
	// AgentRefusals counts plans the placer accepted and a node's allocator then refused (the
	// free-core maps promised CPUs the agent would not give); the simulator undoes and requeues
	// them.
	AgentRefusals int `json:"agentRefusals"`
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func (s *simulation) result() *Result {
	res := &Result{Strategy: s.strategy.Name, Jobs: make([]JobResult, len(s.runs))}
	var resp, wait, runT []float64
	first, last := math.Inf(1), 0.0
	cpuSeconds, stretch := 0.0, 0.0
	for i := range s.runs {
		r := &s.runs[i]
		j := JobResult{Name: r.job.Name, Profile: r.job.Spec.Profile, CPUs: r.job.CPUs(), Submit: seconds(r.job.Arrival),
			End: seconds(r.end), Runtime: seconds(r.job.Runtime), TimedOut: r.timedOut, AgentRefusals: r.refusals}
		first = min(first, j.Submit)
		if r.timedOut {
			res.Summary.TimedOut++
		}
		if r.state == rejected {
			j.Rejected = r.reason
			res.Summary.Rejected++
			res.Jobs[i] = j
			continue
		}
		j.Start = seconds(r.start)
		j.Stretch = (j.End - j.Start) / j.Runtime
		f := r.first
		j.Factors = &f
		j.Workers = len(r.workers)
		var nodes []int
		for _, w := range r.workers {
			if !slices.Contains(nodes, w.Node) {
				nodes = append(nodes, w.Node)
			}
		}
		j.Nodes = len(nodes)
		res.Jobs[i] = j
		res.Summary.Finished++
		resp = append(resp, j.End-j.Submit)
		wait = append(wait, j.Start-j.Submit)
		runT = append(runT, j.End-j.Start)
		stretch += j.Stretch
		cpuSeconds += float64(j.CPUs) * (j.End - j.Start)
		last = max(last, j.End)
	}
	sm := &res.Summary
	sm.Response, sm.Wait, sm.Run = stats(resp), stats(wait), stats(runT)
	if sm.Finished > 0 {
		sm.Stretch = stretch / float64(sm.Finished)
		sm.Makespan = last - first
		if capacity := float64(s.o.Nodes*s.o.Machine.NumCPUs()) * sm.Makespan; capacity > 0 {
			sm.Utilisation = cpuSeconds / capacity
		}
	}
	sm.Events, sm.Attempts, sm.Plans, sm.AgentRefusals = s.events, s.attempts, s.plans, s.refusals
	return res
}

// stats computes the mean and nearest-rank percentiles.
func stats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Stats{Mean: sum / float64(len(s)), P50: rank(0.5), P95: rank(0.95), Max: s[len(s)-1]}
}
