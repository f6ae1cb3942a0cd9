package main

import (
	"fmt"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

// Result is result.json: the run's set-up and one object per arm that ran.
type Result struct {
	Setup     Setup `json:"setup"`
	None      *Arm  `json:"none,omitempty"`
	HPA       *Arm  `json:"hpa,omitempty"`
	Finegrain *Arm  `json:"finegrain,omitempty"`
}

// Setup is what every arm shared.
type Setup struct {
	Trace           loadgen.Trace `json:"trace"`
	TargetSeconds   float64       `json:"targetP99Seconds"`
	HPCJobAtSeconds float64       `json:"hpcJobAtSeconds"`
	Work            int           `json:"cpuserviceWork"`
	PodCPU          string        `json:"podCPU"`
	MaxPodCPU       string        `json:"finegrainMaxPodCPU"`
	MaxReplicas     int32         `json:"maxReplicas"`
	// HPAUtilization is the HPA's target CPU utilisation (percent of the request), PeriodSeconds
	// the ServiceObjective's period, ScaleDownStabilizationSeconds both autoscalers'.
	HPAUtilization                int32    `json:"hpaUtilizationPercent"`
	PeriodSeconds                 int32    `json:"objectivePeriodSeconds"`
	ScaleDownStabilizationSeconds int32    `json:"scaleDownStabilizationSeconds"`
	Nodes                         []string `json:"nodes"`
}

// Arm is one arm's outcome: its measurements, or the error that stopped it (then nothing else).
type Arm struct {
	*servicerun.Measured
	Error string `json:"error,omitempty"`
}

// arms lists the result's arms in the order the bench runs them, with their names.
func (r *Result) arms() []struct {
	name string
	arm  *Arm
} {
	return []struct {
		name string
		arm  *Arm
	}{{"none", r.None}, {"hpa", r.HPA}, {"finegrain", r.Finegrain}}
}

// set records an arm's outcome under its name.
func (r *Result) set(name string, a *Arm) error {
	switch name {
	case armNone:
		r.None = a
	case armHPA:
		r.HPA = a
	case armFinegrain:
		r.Finegrain = a
	default:
		return fmt.Errorf("arm %q: want one of %s, %s, %s", name, armNone, armHPA, armFinegrain)
	}
	return nil
}
