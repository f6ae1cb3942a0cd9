// Package servicerun records a service under a load trace while an autoscaler resizes it — the
// load generator's per-second series (offered and achieved load, p99 latency from the scheduled
// send), a sample of the service every second (the size decided, the CPUs its running pods are
// granted and use, the autoscaler's decision), and what they add up to (seconds in violation of a
// p99 target, CPU-seconds, resizes) — and writes it as JSON and a PNG. make bench-dc-objective
// (bench/dcobjective) runs it once per arm (issue 20). It is outside bench/internal, with the load
// generator in internal/loadgen, so that an e2e test of test/e2e can record the same series.
package servicerun

import (
	"cmp"
	"slices"

	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

// Measured is what a run under load measured.
type Measured struct {
	// ViolationSeconds counts the load's seconds whose p99 latency (loadgen's, from the
	// scheduled send) exceeded the target, or in which a request failed.
	ViolationSeconds int `json:"violationSeconds"`
	// CPUSeconds is the CPU time the service's pods used during the load, from their cgroups.
	CPUSeconds float64 `json:"cpuSeconds"`
	// CPUSecondsGranted is the CPU the service's running pods were granted (their limits as the
	// kubelet applies them) integrated over the samples: what the autoscaler reserved, used or
	// not.
	CPUSecondsGranted float64 `json:"cpuSecondsGranted"`
	// Resizes counts the changes of the service's size: replicas or CPU per pod.
	Resizes int `json:"resizes"`

	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	P99Seconds float64 `json:"p99Seconds"`
	// HPCNode is where the HPC job's worker went, HPCNodeRunsService whether the service had a
	// pod there then.
	HPCNode            string `json:"hpcNode"`
	HPCNodeRunsService bool   `json:"hpcNodeRunsService"`
	// Load is loadgen's series, one entry per second of the trace.
	Load []loadgen.Second `json:"load"`
	// Size is the sampler's series, about one entry per second.
	Size []Point `json:"size"`
	// Decisions are the samples at which the size changed.
	Decisions []Point `json:"decisions"`
}

// Point is one sample of the service: its decided size, the CPU its running pods are granted
// and have used so far.
type Point struct {
	// T is seconds since the load started.
	T float64 `json:"t"`
	// Replicas is the workload's spec.replicas, PodCPU the CPU per pod decided (cores).
	Replicas int32   `json:"replicas"`
	PodCPU   float64 `json:"podCPU"`
	// Granted is the sum of the running pods' CPU limits as the kubelet applies them (cores).
	Granted float64 `json:"cpusGranted"`
	// ReadyPods receive load.
	ReadyPods int `json:"readyPods"`
	// CPUUsed is the pods' CPU use since the previous sample (cores).
	CPUUsed float64 `json:"cpusUsed"`
	// Note is what the autoscaler said: the objective's decision and reason, or the HPA's
	// measured utilisation.
	Note string `json:"note,omitempty"`
	// usage is each pod's cumulative CPU seconds (by pod UID) at this sample.
	usage map[string]float64
}

// violationSeconds counts the seconds with load whose p99 exceeds target or that saw a failure.
func violationSeconds(seconds []loadgen.Second, target float64) int {
	n := 0
	for _, s := range seconds {
		if s.Offered > 0 && (s.P99Seconds > target || s.Errors > 0) {
			n++
		}
	}
	return n
}

// cpuSeconds is the CPU time the pods used over the samples: for each pod its last cumulative
// value less its value at the first sample, or less nothing for a pod that first appears later
// (it was created during the run, and its cgroup counted from zero). A pod gone between two
// samples loses at most what it used after its last sample.
func cpuSeconds(points []Point) float64 {
	if len(points) == 0 {
		return 0
	}
	base := points[0].usage
	last := map[string]float64{}
	for _, p := range points {
		for uid, v := range p.usage {
			last[uid] = v
		}
	}
	total := 0.0
	for uid, v := range last {
		total += v - base[uid]
	}
	return total
}

// grantedSeconds integrates the points' Granted over time, each sample's value holding until the
// next.
func grantedSeconds(points []Point) float64 {
	total := 0.0
	for i := 1; i < len(points); i++ {
		total += points[i-1].Granted * (points[i].T - points[i-1].T)
	}
	return total
}

// fillCPUUsed sets each point's CPUUsed from the pods' cumulative usage: the growth since the
// previous point of every pod present in both (a new pod counts from zero), over the time between.
func fillCPUUsed(points []Point) {
	for i := 1; i < len(points); i++ {
		dt := points[i].T - points[i-1].T
		if dt <= 0 {
			continue
		}
		used := 0.0
		for uid, v := range points[i].usage {
			used += v - points[i-1].usage[uid]
		}
		points[i].CPUUsed = used / dt
	}
}

// decisions returns the points at which the size (replicas, CPU per pod) differs from the
// point before.
func decisions(points []Point) []Point {
	out := []Point{}
	for i := 1; i < len(points); i++ {
		if points[i].Replicas != points[i-1].Replicas || points[i].PodCPU != points[i-1].PodCPU {
			out = append(out, points[i])
		}
	}
	return out
}

// Measure turns a run's load report and samples into its measurements against a p99 target in
// seconds.
func Measure(rep *loadgen.Report, points []Point, target float64) *Measured {
	slices.SortStableFunc(points, func(a, b Point) int { return cmp.Compare(a.T, b.T) })
	fillCPUUsed(points)
	d := decisions(points)
	return &Measured{
		ViolationSeconds:  violationSeconds(rep.Seconds, target),
		CPUSeconds:        cpuSeconds(points),
		CPUSecondsGranted: grantedSeconds(points),
		Resizes:           len(d),
		Requests:          rep.Summary.Requests,
		Errors:            rep.Summary.Errors,
		P99Seconds:        rep.Summary.P99Seconds,
		Load:              rep.Seconds,
		Size:              points,
		Decisions:         d,
	}
}
