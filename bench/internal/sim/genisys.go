package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// GenisysScenario is one way of running the workload.
type GenisysScenario struct {
	Name string
	// Nodes gives a static scenario's nodes for nodes of cpus CPUs; nil for finegrain.
	Nodes func(cpus int) []genisysNode
	// Placement is a finegrain scenario's placement policy.
	Placement v1alpha1.PlacementPolicy
}

// Scenario names.
const (
	GenisysDedicated   = "Dedicated"
	GenisysUnmanaged   = "Unmanaged"
	GenisysPartitioned = "Partitioned"
)

// genisysRepeat is n copies of a node.
func genisysRepeat(n int, node genisysNode) []genisysNode {
	out := make([]genisysNode, n)
	for i := range out {
		out[i] = node
	}
	return out
}

// threadPartitioned gives Slurm percent of every node's CPUs and kube-scheduler the rest.
func threadPartitioned(percent int) GenisysScenario {
	return GenisysScenario{Name: fmt.Sprintf("Thread-partitioned-%d", percent), Nodes: func(cpus int) []genisysNode {
		slurm := cpus * percent / 100
		return genisysRepeat(GenisysNodes, genisysNode{cpus: cpus, slurm: slurm, kube: cpus - slurm})
	}}
}

// GenisysScenarios are the thesis's scenarios after the baseline: Dedicated (the normaliser: the
// steps alone on a Slurm cluster of the five nodes, the services on five nodes of their own),
// Unmanaged (Slurm and kube-scheduler each believe every CPU theirs), Partitioned (2 nodes
// Kubernetes, 3 Slurm), Thread-partitioned 50 % and 75 % (Slurm's share of every node's CPUs)
// and finegrain with each placement policy.
var GenisysScenarios = []GenisysScenario{
	{Name: GenisysDedicated, Nodes: func(cpus int) []genisysNode {
		return append(genisysRepeat(GenisysNodes, genisysNode{cpus: cpus, slurm: cpus}), genisysRepeat(GenisysNodes, genisysNode{cpus: cpus, kube: cpus})...)
	}},
	{Name: GenisysUnmanaged, Nodes: func(cpus int) []genisysNode {
		return genisysRepeat(GenisysNodes, genisysNode{cpus: cpus, slurm: cpus, kube: cpus})
	}},
	{Name: GenisysPartitioned, Nodes: func(cpus int) []genisysNode {
		return append(genisysRepeat(2, genisysNode{cpus: cpus, kube: cpus}), genisysRepeat(3, genisysNode{cpus: cpus, slurm: cpus})...)
	}},
	threadPartitioned(50),
	threadPartitioned(75),
	{Name: "finegrain-least-loaded", Placement: v1alpha1.LeastLoaded},
	{Name: "finegrain-most-loaded", Placement: v1alpha1.MostLoaded},
}

// severeViolation is the latency over target beyond which a violation counts as severe.
const severeViolation = 1.1

// GenisysStepResult is one step's run.
type GenisysStepResult struct {
	Name  string `json:"name"`
	Tasks int    `json:"tasks"`
	// Submit, Start and End are seconds from the simulation's start.
	Submit float64 `json:"submit"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	// NormalizedTime is the step's execution time (end − start) over its time on the dedicated
	// cluster.
	NormalizedTime float64 `json:"normalizedTime"`
	// NormalizedTurnaround is the step's submit → end over the same on the dedicated cluster:
	// its wait counts too.
	NormalizedTurnaround float64 `json:"normalizedTurnaround"`
}

// GenisysSample is the cluster at one period: the CPUs busy with steps and services over all.
type GenisysSample struct {
	At          float64
	Utilization float64
}

// GenisysResult is one scenario's run; the JSON keys are the experiments' where they apply.
type GenisysResult struct {
	Scenario string `json:"-"`
	// TotalTime is from the first job's submission to the last step's end; NormalizedTotalTime
	// that over the Dedicated scenario's; Makespan from the first step's start to the last
	// step's end (seconds).
	TotalTime           float64 `json:"totalTime"`
	NormalizedTotalTime float64 `json:"normalizedTotalTime"`
	Makespan            float64 `json:"makespan"`
	// Utilization is the mean over the periods of the total time of the CPUs busy (steps' ranks
	// and services' work, at most each node's CPUs) over the nodes' CPUs, 0–1. The Dedicated
	// scenario counts the Slurm cluster only.
	Utilization float64 `json:"utilization"`
	// MeanNormalizedStepTime and MaxNormalizedStepTime summarise the steps' normalised times.
	MeanNormalizedStepTime float64             `json:"meanNormalizedStepTime"`
	MaxNormalizedStepTime  float64             `json:"maxNormalizedStepTime"`
	Steps                  []GenisysStepResult `json:"steps"`
	// ServiceViolationSeconds is the seconds of the total time in which a service's latency
	// was above its target, summed over the services; ServiceViolations per service.
	ServiceViolationSeconds float64            `json:"serviceViolationSeconds"`
	ServiceViolations       map[string]float64 `json:"serviceViolations"`
	// SevereViolationSeconds counts, the same way, the seconds more than 10 % over the target.
	SevereViolationSeconds float64 `json:"severeViolationSeconds"`
	// MeanLatencyRatio is the services' latency over their target, averaged over the services
	// and the seconds of the total time.
	MeanLatencyRatio float64 `json:"meanLatencyRatio"`
	// PendingPods counts service pods a static scenario's kube-scheduler could not place.
	PendingPods int `json:"pendingPods"`
	// Samples are the utilisation over time, one per period.
	Samples []GenisysSample `json:"-"`
}

// GenisysReport is one workload's run under every scenario.
type GenisysReport struct {
	Command, Workload, Machine string
	Seed                       uint64
	Services                   []GenisysService
	Jobs                       []GenisysJob
	Results                    []*GenisysResult
}

// RunGenisys runs the workload under every scenario, Dedicated first, and normalises the others
// to it.
func RunGenisys(w *GenisysWorkload) ([]*GenisysResult, error) {
	topo, _, err := LoadMachine(GenisysMachine)
	if err != nil {
		return nil, err
	}
	var out []*GenisysResult
	for _, sc := range GenisysScenarios {
		var c genisysCluster
		pending := 0
		if sc.Nodes != nil {
			sc := newStaticCluster(sc.Nodes(topo.NumCPUs()), w)
			for _, n := range sc.pending {
				pending += n
			}
			c = sc
		} else if c, err = newFinegrainCluster(sc.Placement, topo, w); err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, err)
		}
		r, err := simulateGenisys(w, c, sc.Name == GenisysDedicated)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, err)
		}
		r.Scenario, r.PendingPods = sc.Name, pending
		out = append(out, r)
	}
	base := out[0]
	for _, r := range out {
		r.NormalizedTotalTime = r.TotalTime / base.TotalTime
		for i := range r.Steps {
			s, b := &r.Steps[i], &base.Steps[i]
			s.NormalizedTurnaround = (s.End - s.Submit) / (b.End - b.Submit)
		}
	}
	return out, nil
}

// genisysStep is a step's state in the simulation.
type genisysStep struct {
	GenisysStep
	job                 int
	submit, start       float64
	ranks               []int
	remaining, end      float64
	running, terminated bool
}

// floatingPenalty is the simulator's measured cost of floating beside a noisy neighbour (the
// cpu profile's floatingPenalty, docs/simulator.md): where steps and service pods float over the
// same CPUs, everything on the node runs 1 + floatingPenalty × min(1, U) times slower still, U
// the node's demand over its CPUs — the runtime model's Interference factor.
var floatingPenalty = DefaultModel().CPU.FloatingPenalty

// simulateGenisys runs the workload on one cluster, one second at a time. Each second: the steps
// submitted by then (a job's first at its submission, each next when the one before ended) are
// offered to the cluster in submission order, each that fits starting (a step that does not fit
// does not hold back later ones: Slurm's backfill, the placer's queue); every node's CPUs are
// time-shared among its demand — its steps' ranks (one CPU each) and its service pods' work
// (each pod busy with its share of the service's rate × work, at most its CPU) — so where the
// demand U exceeds the node's CPUs everything on it runs at 1/U of its speed, and where steps
// and pods float over the same CPUs (Unmanaged) at 1/(max(1, U) × (1 + floatingPenalty ×
// min(1, U))), the runtime model's Interference factor; a step
// advances at the speed of its slowest node (its ranks synchronise); a service's latency is
// ServiceLatency on the CPU its pods get. Every period the latencies' mean goes to the cluster's
// control (the objective law for finegrain). The run ends when every step has.
// slurmOnly counts only the nodes with Slurm CPUs in the utilisation (the Dedicated baseline).
func simulateGenisys(w *GenisysWorkload, c genisysCluster, slurmOnly bool) (*GenisysResult, error) {
	phys := c.physical()
	var steps []*genisysStep
	first := make([]int, len(w.Jobs))
	for j, job := range w.Jobs {
		first[j] = len(steps)
		for _, s := range job.Steps {
			steps = append(steps, &genisysStep{GenisysStep: s, job: j, remaining: s.Runtime.Seconds()})
		}
	}
	var queue []int
	next := make([]int, len(w.Jobs))
	submit := func(t float64) {
		for j, job := range w.Jobs {
			if next[j] >= len(job.Steps) || job.Submit.Seconds() > t {
				continue
			}
			id := first[j] + next[j]
			if s := steps[id]; next[j] == 0 || steps[id-1].terminated {
				s.submit = t
				queue = append(queue, id)
				next[j]++
			}
		}
	}
	res := &GenisysResult{ServiceViolations: map[string]float64{}}
	for _, s := range w.Services {
		res.ServiceViolations[s.Name] = 0
	}
	firstSubmit := math.Inf(1)
	for _, j := range w.Jobs {
		firstSubmit = min(firstSubmit, j.Submit.Seconds())
	}
	periodTicks := int(genisysPeriod / genisysTick)
	latSum := make([]float64, len(w.Services))
	busySum, busyCPUs := 0.0, 0
	ratioSum, ratioN := 0.0, 0
	for i, n := range phys {
		if !slurmOnly || i < GenisysNodes {
			busyCPUs += n
		}
	}
	left, changed, ended := len(steps), true, false
	maxTicks := 1_000_000
	for tick := 0; left > 0; tick++ {
		if tick >= maxTicks {
			return nil, fmt.Errorf("%d steps still unfinished after %d s: a step that never fits?", left, maxTicks)
		}
		t := float64(tick)
		before := len(queue)
		submit(t)
		if ended {
			// The kubelet and kube-scheduler see the freed CPUs as soon as the placer does.
			if _, err := c.settle(time.Duration(tick) * genisysTick); err != nil {
				return nil, err
			}
			ended = false
		}
		if changed || len(queue) != before {
			var err error
			if queue, err = startQueued(c, steps, queue, t); err != nil {
				return nil, err
			}
			changed = false
		}
		hpc := make([]float64, len(phys))
		for _, s := range steps {
			if s.running {
				for i, r := range s.ranks {
					hpc[i] += float64(r)
				}
			}
		}
		demand := append([]float64(nil), hpc...)
		type podLoad struct {
			node       int
			cpu, share float64
		}
		loads := make([][]podLoad, len(w.Services))
		for k := range w.Services {
			s := &w.Services[k]
			pods := c.pods(k)
			total := 0.0
			for _, p := range pods {
				total += float64(p.milli) / 1000
			}
			work := min(s.Rate(t)*s.Work, total)
			for _, p := range pods {
				cpu := float64(p.milli) / 1000
				demand[p.node] += work * cpu / total
				loads[k] = append(loads[k], podLoad{node: p.node, cpu: cpu})
			}
		}
		speed := make([]float64, len(phys))
		busy := 0.0
		for i, d := range demand {
			u := d / float64(phys[i])
			slow := max(1, u)
			if hpc[i] > 0 && d > hpc[i] && c.floating(i) {
				slow *= 1 + floatingPenalty*min(1, u)
			}
			speed[i] = 1 / slow
			if !slurmOnly || i < GenisysNodes {
				busy += min(d, float64(phys[i]))
			}
		}
		inSpan := t >= firstSubmit
		for k := range w.Services {
			s := &w.Services[k]
			capacity := 0.0
			for _, l := range loads[k] {
				capacity += l.cpu * speed[l.node]
			}
			lat := ServiceLatency(s.Work, s.Rate(t), capacity)
			latSum[k] += lat
			if inSpan {
				ratioSum += lat / s.Target
				ratioN++
			}
			if inSpan && lat > severeViolation*s.Target {
				res.SevereViolationSeconds++
			}
			if inSpan && lat > s.Target {
				res.ServiceViolations[s.Name]++
				res.ServiceViolationSeconds++
			}
		}
		for id, s := range steps {
			if !s.running {
				continue
			}
			rate := 1.0
			for i, r := range s.ranks {
				if r > 0 {
					rate = min(rate, speed[i])
				}
			}
			if s.remaining <= rate {
				s.end = t + s.remaining/rate
				s.running, s.terminated = false, true
				left--
				changed, ended = true, true
				if err := c.finish(id); err != nil {
					return nil, err
				}
				continue
			}
			s.remaining -= rate
		}
		busySum += busy
		if (tick+1)%periodTicks == 0 {
			if inSpan {
				res.Samples = append(res.Samples, GenisysSample{At: t + 1, Utilization: busySum / float64(periodTicks*busyCPUs)})
			}
			busySum = 0
			mean := make([]float64, len(latSum))
			for k := range latSum {
				mean[k], latSum[k] = latSum[k]/float64(periodTicks), 0
			}
			freed, err := c.control(time.Duration(tick+1)*genisysTick, mean)
			if err != nil {
				return nil, err
			}
			changed = changed || freed
		}
	}
	if ratioN > 0 {
		res.MeanLatencyRatio = ratioSum / float64(ratioN)
	}
	return summarizeGenisys(res, steps, firstSubmit), nil
}

// startQueued offers the queued steps to the cluster in order and returns those still waiting.
func startQueued(c genisysCluster, steps []*genisysStep, queue []int, t float64) ([]int, error) {
	waiting := queue[:0]
	for _, id := range queue {
		ranks, ok, err := c.start(time.Duration(t)*time.Second, id)
		if err != nil {
			return nil, fmt.Errorf("step %s: %w", steps[id].Name, err)
		}
		if !ok {
			waiting = append(waiting, id)
			continue
		}
		s := steps[id]
		s.ranks, s.start, s.running = ranks, t, true
	}
	return waiting, nil
}

func summarizeGenisys(res *GenisysResult, steps []*genisysStep, firstSubmit float64) *GenisysResult {
	firstStart, last := math.Inf(1), 0.0
	for _, s := range steps {
		n := (s.end - s.start) / s.Runtime.Seconds()
		res.Steps = append(res.Steps, GenisysStepResult{Name: s.Name, Tasks: s.Tasks, Submit: s.submit, Start: s.start, End: s.end, NormalizedTime: n})
		res.MeanNormalizedStepTime += n
		res.MaxNormalizedStepTime = max(res.MaxNormalizedStepTime, n)
		firstStart, last = min(firstStart, s.start), max(last, s.end)
	}
	res.MeanNormalizedStepTime /= float64(len(steps))
	res.TotalTime, res.Makespan = last-firstSubmit, last-firstStart
	for _, s := range res.Samples {
		res.Utilization += s.Utilization
	}
	if len(res.Samples) > 0 {
		res.Utilization /= float64(len(res.Samples))
	}
	return res
}
