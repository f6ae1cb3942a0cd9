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

// ElasticType is one job type of the experiment: its replica bounds, its length in timesteps,
// its strong-scaling curve and what load balancing costs it after a rescale.
type ElasticType struct {
	Name string
	// Min and Max bound the job's replicas.
	Min, Max int
	// Timesteps is how many timesteps a job of the type runs.
	Timesteps int
	// Steps is the measured time of one timestep, in seconds, on some replica counts (at least
	// one, counts increasing). Between two counts the time is interpolated linearly; below the
	// first and above the last it is the nearest measurement's (no speed-up is claimed beyond
	// what was measured).
	Steps []ScalePoint
	// Balance is the measured load-balancing time, in seconds, of a rescale on some replica
	// counts, read the same way; none means no load-balancing cost.
	Balance []ScalePoint
}

// ScalePoint is one measurement: Seconds on Replicas replicas.
type ScalePoint struct {
	Replicas int
	Seconds  float64
}

// at reads a measured curve at n replicas: linear between measurements, the nearest one's value
// outside them, 0 for no measurements.
func at(ps []ScalePoint, n int) float64 {
	switch {
	case len(ps) == 0:
		return 0
	case n <= ps[0].Replicas:
		return ps[0].Seconds
	}
	for i := 1; i < len(ps); i++ {
		if n <= ps[i].Replicas {
			a, b := ps[i-1], ps[i]
			return a.Seconds + (b.Seconds-a.Seconds)*float64(n-a.Replicas)/float64(b.Replicas-a.Replicas)
		}
	}
	return ps[len(ps)-1].Seconds
}

// StepTime is the time of one timestep on n replicas.
func (t *ElasticType) StepTime(n int) float64 { return at(t.Steps, n) }

// Speedup is the speed-up on n replicas over the type's minimum.
func (t *ElasticType) Speedup(n int) float64 { return t.StepTime(t.Min) / t.StepTime(n) }

// ElasticModel is the experiment's runtime model: the job types and what a rescale costs.
type ElasticModel struct {
	Types []ElasticType
	// A rescale from a replicas to b replicas stalls the job for a checkpoint on a replicas
	// (CheckpointBase + CheckpointPerReplica × a), then a restart (RestartBase +
	// RestartPerReplica × a: the replicas connect) and the type's load balancing on a, in
	// seconds; restart and load balancing are charged on the replicas before the rescale, as
	// the paper's authors' simulator charges them. A shrink gives its slots back when its
	// checkpoint is written (the application has acknowledged; its pods go), so a job that
	// shrank others for its start starts when the slowest of them has checkpointed.
	CheckpointBase, CheckpointPerReplica float64
	RestartBase, RestartPerReplica       float64
	// ConnectAtStart charges a job's start the restart's connect time on its replicas
	// (RestartBase + RestartPerReplica × n) before its first timestep, as the authors'
	// simulator does.
	ConnectAtStart bool
	// PriorityByType is the job mix GenerateElastic draws: false draws every job's priority
	// uniformly from 1–5 (the experiment); true gives the i-th of k types (from 0) a
	// priority of k − i or k − i + 1, each with even odds — with the four default types small
	// 4–5, medium 3–4, large 2–3, xlarge 1–2, as the paper's authors' simulator draws them
	// (run.py at 11d5497, generate_job_list).
	PriorityByType bool
}

// Checkpoint is the time to checkpoint a job of n replicas.
func (m *ElasticModel) Checkpoint(n int) float64 {
	return m.CheckpointBase + m.CheckpointPerReplica*float64(n)
}

// Rescale is the stall of a job of type t rescaled from a replicas (to any count).
func (m *ElasticModel) Rescale(t *ElasticType, a int) float64 {
	return m.Checkpoint(a) + m.Connect(a) + at(t.Balance, a)
}

// Connect is the time n replicas take to connect at a restart.
func (m *ElasticModel) Connect(n int) float64 {
	return m.RestartBase + m.RestartPerReplica*float64(n)
}

// StartDelay is the time a job started on n replicas takes before its first timestep.
func (m *ElasticModel) StartDelay(n int) float64 {
	if m.ConnectAtStart {
		return m.Connect(n)
	}
	return 0
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
	if m.PriorityByType && len(m.Types) > ElasticMaxPriority-1 {
		return fmt.Errorf("elastic model: priorities by type for %d types; the priorities 1–5 hold at most 4", len(m.Types))
	}
	for _, t := range m.Types {
		switch {
		case t.Name == "":
			return fmt.Errorf("elastic model: a type without a name")
		case t.Min < 1 || t.Max < t.Min:
			return fmt.Errorf("elastic model: type %s: replicas %d to %d; want 1 ≤ min ≤ max", t.Name, t.Min, t.Max)
		case t.Timesteps < 1:
			return fmt.Errorf("elastic model: type %s: %d timesteps; want at least 1", t.Name, t.Timesteps)
		case len(t.Steps) == 0:
			return fmt.Errorf("elastic model: type %s: no measured step times; give at least one", t.Name)
		}
		if err := checkCurve(t.Steps, true); err != nil {
			return fmt.Errorf("elastic model: type %s: step times: %w", t.Name, err)
		}
		if err := checkCurve(t.Balance, false); err != nil {
			return fmt.Errorf("elastic model: type %s: load balancing: %w", t.Name, err)
		}
	}
	for _, c := range []float64{m.CheckpointBase, m.CheckpointPerReplica, m.RestartBase, m.RestartPerReplica} {
		if !(c >= 0) || math.IsInf(c, 0) {
			return fmt.Errorf("elastic model: rescale cost %v s; want a finite number, 0 or more", c)
		}
	}
	return nil
}

// checkCurve checks a measured curve: replica counts from 1 up, increasing, times finite and
// positive (or, when positive is false, 0 or more).
func checkCurve(ps []ScalePoint, positive bool) error {
	for i, p := range ps {
		switch {
		case p.Replicas < 1 || i > 0 && p.Replicas <= ps[i-1].Replicas:
			return fmt.Errorf("replica count %d at point %d; want counts from 1 up, increasing", p.Replicas, i+1)
		case math.IsNaN(p.Seconds) || math.IsInf(p.Seconds, 0) || p.Seconds < 0 || positive && p.Seconds == 0:
			return fmt.Errorf("%v s on %d replicas; want a finite time above 0", p.Seconds, p.Replicas)
		}
	}
	return nil
}

// DefaultElasticModel is the paper's four types (min 2/4/8/16, max 8/16/32/64 replicas,
// 40,000/40,000/40,000/10,000 timesteps) with the measurements its authors' simulator runs on
// (github.com/adityapb/mpi-operator, examples/v2beta1/charm/simulation/run.py at 11d5497,
// StencilJob: a Charm++ 2-D stencil of 512, 2,048, 8,192 and 16,384 points a side for small,
// medium, large and xlarge, i.e. the type's minimum × 256, 512, 1,024, 1,024). Step times:
// small 0.996/0.675/0.627 ms on 2/4/8 replicas; medium 3.28/2.1/2.3 ms on 4/8/16; large
// 32.5/27.5/16 ms on 8/16/32; xlarge 110/64/35 ms on 16/32/59. Load balancing after a rescale:
// small 6 ms on 2–8; medium 9.7/9.7/46.7 ms on 4/8/16; large 0.616/2.93/25.1 s on 8/16/32;
// xlarge 14.6/95.8/59.8 s on 16/32/59. A restart's connect time was measured as 1.248, 1.492,
// 3.902, 5.035, 6.949 and 12.25 s on 2, 4, 8, 16, 32 and 59 replicas; the restart cost is the
// least-squares line through them, 1.434 s + 0.1841 s per replica, as the authors' simulator
// fits it, charged at every start too. Restart and load balancing are charged on the replicas
// before a rescale, as the authors' simulator charges them. No checkpoint time was measured
// apart from these: the checkpoint costs nothing, so a shrunk job's slots are free at once, as
// in the authors' simulator. docs/experiments.md says where this model still differs from
// theirs.
func DefaultElasticModel() ElasticModel {
	return ElasticModel{
		Types: []ElasticType{
			{Name: "small", Min: 2, Max: 8, Timesteps: 40_000,
				Steps:   []ScalePoint{{2, 0.000996}, {4, 0.000675}, {8, 0.000627}},
				Balance: []ScalePoint{{2, 0.006}, {4, 0.006}, {8, 0.006}}},
			{Name: "medium", Min: 4, Max: 16, Timesteps: 40_000,
				Steps:   []ScalePoint{{4, 0.00328}, {8, 0.0021}, {16, 0.0023}},
				Balance: []ScalePoint{{4, 0.0097}, {8, 0.0097}, {16, 0.046659}}},
			{Name: "large", Min: 8, Max: 32, Timesteps: 40_000,
				Steps:   []ScalePoint{{8, 0.0325}, {16, 0.0275}, {32, 0.016}},
				Balance: []ScalePoint{{8, 0.61581}, {16, 2.934641}, {32, 25.083405}}},
			{Name: "xlarge", Min: 16, Max: 64, Timesteps: 10_000,
				Steps:   []ScalePoint{{16, 0.11}, {32, 0.064}, {59, 0.035}},
				Balance: []ScalePoint{{16, 14.601492}, {32, 95.771426}, {59, 59.793259}}},
		},
		RestartBase: 1.4336337930556513, RestartPerReplica: 0.18408427472451314,
		ConnectAtStart: true,
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
