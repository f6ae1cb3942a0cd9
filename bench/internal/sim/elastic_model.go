package sim

import (
	"fmt"
	"math"
	"slices"
)

// The elastic scheduler's experiment (issue 18, experiment 1): Charm++-style jobs of four types
// on a cluster of slots, each replica one slot and each running job's launcher one more, started,
// shrunk and grown by the placer's elastic policy (pkg/placer/elastic) under four strategies.
// docs/experiments.md documents the model and compares its results with the paper's.

// ElasticType is one job type of the experiment: its replica bounds, its length in timesteps and
// its strong-scaling curve.
type ElasticType struct {
	Name string
	// Min and Max bound the job's replicas.
	Min, Max int
	// Timesteps is how many timesteps a job of the type runs.
	Timesteps int
	// StepSeconds is one timestep's time on one replica.
	StepSeconds float64
	// SerialFraction is the share of a timestep that does not shrink with more replicas
	// (Amdahl): on n replicas a timestep takes StepSeconds × (SerialFraction + (1 −
	// SerialFraction)/n), so the speed-up is 1 / (SerialFraction + (1 − SerialFraction)/n) and
	// fewer replicas run with higher parallel efficiency.
	SerialFraction float64
}

// StepTime is the time of one timestep on n replicas.
func (t *ElasticType) StepTime(n int) float64 {
	return t.StepSeconds * (t.SerialFraction + (1-t.SerialFraction)/float64(n))
}

// Speedup is the speed-up on n replicas over one replica.
func (t *ElasticType) Speedup(n int) float64 { return t.StepTime(1) / t.StepTime(n) }

// ElasticModel is the experiment's runtime model: the job types and what a rescale costs.
type ElasticModel struct {
	Types []ElasticType
	// A rescale from a replicas to b replicas stalls the job for a checkpoint on a replicas
	// (CheckpointBase + CheckpointPerReplica × a), then a restart with load balancing on b
	// (RestartBase + RestartPerReplica × b), in seconds. A shrink gives its slots back when its
	// checkpoint is written (the application has acknowledged; its pods go), so a job that
	// shrank others for its start starts when the slowest of them has checkpointed.
	CheckpointBase, CheckpointPerReplica float64
	RestartBase, RestartPerReplica       float64
}

// Checkpoint is the time to checkpoint a job of n replicas.
func (m *ElasticModel) Checkpoint(n int) float64 {
	return m.CheckpointBase + m.CheckpointPerReplica*float64(n)
}

// Rescale is the stall of a job rescaled from a to b replicas.
func (m *ElasticModel) Rescale(a, b int) float64 {
	return m.Checkpoint(a) + m.RestartBase + m.RestartPerReplica*float64(b)
}

// Type returns the type named name.
func (m *ElasticModel) Type(name string) (*ElasticType, error) {
	for i := range m.Types {
		if m.Types[i].Name == name {
			return &m.Types[i], nil
		}
	}
	names := make([]string, len(m.Types))
	for i := range m.Types {
		names[i] = m.Types[i].Name
	}
	return nil, fmt.Errorf("type %q: want one of %v", name, names)
}

// Validate checks every type and cost.
func (m *ElasticModel) Validate() error {
	if len(m.Types) == 0 {
		return fmt.Errorf("elastic model: no job types")
	}
	for _, t := range m.Types {
		switch {
		case t.Name == "":
			return fmt.Errorf("elastic model: a type without a name")
		case t.Min < 1 || t.Max < t.Min:
			return fmt.Errorf("elastic model: type %s: replicas %d to %d; want 1 ≤ min ≤ max", t.Name, t.Min, t.Max)
		case t.Timesteps < 1:
			return fmt.Errorf("elastic model: type %s: %d timesteps; want at least 1", t.Name, t.Timesteps)
		case !(t.StepSeconds > 0) || math.IsInf(t.StepSeconds, 0):
			return fmt.Errorf("elastic model: type %s: step time %v s; want a positive number", t.Name, t.StepSeconds)
		case !(t.SerialFraction >= 0) || t.SerialFraction > 1:
			return fmt.Errorf("elastic model: type %s: serial fraction %v; want 0 to 1", t.Name, t.SerialFraction)
		}
	}
	for _, c := range []float64{m.CheckpointBase, m.CheckpointPerReplica, m.RestartBase, m.RestartPerReplica} {
		if !(c >= 0) || math.IsInf(c, 0) {
			return fmt.Errorf("elastic model: rescale cost %v s; want a finite number, 0 or more", c)
		}
	}
	return nil
}

// DefaultElasticModel is the model docs/experiments.md justifies: the paper's four types (min
// 2/4/8/16, max 8/16/32/64 replicas, 40,000/40,000/40,000/10,000 timesteps) with a timestep
// that doubles in work from one type to the next (xlarge: eight times large's work per step, a
// quarter of the steps), larger problems scaling better (serial fraction 4 %, 2 %, 1 %, 0.5 %),
// and a rescale costing 2 s + 0.1 s per replica to checkpoint and 3 s + 0.15 s per replica to
// restart and balance load.
func DefaultElasticModel() ElasticModel {
	return ElasticModel{
		Types: []ElasticType{
			{Name: "small", Min: 2, Max: 8, Timesteps: 40_000, StepSeconds: 0.06, SerialFraction: 0.04},
			{Name: "medium", Min: 4, Max: 16, Timesteps: 40_000, StepSeconds: 0.12, SerialFraction: 0.02},
			{Name: "large", Min: 8, Max: 32, Timesteps: 40_000, StepSeconds: 0.24, SerialFraction: 0.01},
			{Name: "xlarge", Min: 16, Max: 64, Timesteps: 10_000, StepSeconds: 1.92, SerialFraction: 0.005},
		},
		CheckpointBase: 2, CheckpointPerReplica: 0.1,
		RestartBase: 3, RestartPerReplica: 0.15,
	}
}

// ElasticStrategy is how the experiment sizes jobs.
type ElasticStrategy string

// The experiment's strategies. Every one runs the same policy code; they differ in the bounds
// and rescalability each job gets.
const (
	// RigidMin runs every job at its minimum.
	RigidMin ElasticStrategy = "rigid-min"
	// RigidMax runs every job at its maximum (at most the cluster's slots less the launcher's).
	RigidMax ElasticStrategy = "rigid-max"
	// Moldable starts a job with as many replicas as fit, min(free − 1, max), at least its
	// minimum, and never rescales it.
	Moldable ElasticStrategy = "moldable"
	// Elastic starts as Moldable does, after shrinking jobs of lower or equal priority, and
	// shrinks and grows running jobs.
	Elastic ElasticStrategy = "elastic"
)

// ElasticStrategies are the experiment's strategies in the order its tables list them.
var ElasticStrategies = []ElasticStrategy{RigidMin, RigidMax, Moldable, Elastic}

// ParseElasticStrategies reads a list of strategy names ("all" for every one).
func ParseElasticStrategies(names []string) ([]ElasticStrategy, error) {
	if len(names) == 1 && names[0] == "all" {
		return slices.Clone(ElasticStrategies), nil
	}
	var out []ElasticStrategy
	for _, n := range names {
		s := ElasticStrategy(n)
		if !slices.Contains(ElasticStrategies, s) {
			return nil, fmt.Errorf("unknown elastic strategy %q; want all or some of %v", n, ElasticStrategies)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
