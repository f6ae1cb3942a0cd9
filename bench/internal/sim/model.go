package sim

import (
	"errors"
	"fmt"
	"math"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// ProfileParams are the runtime model's parameters for one job profile.
type ProfileParams struct {
	// MemoryShare is the fraction of a task's base runtime spent waiting on memory: the part that
	// remote memory and memory-bandwidth saturation stretch.
	MemoryShare float64 `json:"memoryShare"`
	// BandwidthPerThread is the fraction of one NUMA node's memory bandwidth one busy thread of
	// the job draws; a NUMA node is saturated when its threads' fractions add up to more than 1.
	BandwidthPerThread float64 `json:"bandwidthPerThread"`
	// CommShare is the fraction of the base runtime spent exchanging messages with other ranks
	// (measured with every rank on one NUMA node, i.e. through shared memory).
	CommShare float64 `json:"commShare"`
	// FloatingPenalty is how much longer an unpinned thread takes when the shared pool it floats
	// in is fully busy (migrations, cache refills, preemption by its neighbours); it scales
	// linearly with how busy the pool is.
	FloatingPenalty float64 `json:"floatingPenalty"`
}

// Model is the runtime model: a job's rate of progress is 1 / (product of its slowdown factors),
// recomputed whenever a job starts or ends. docs/simulator.md gives every formula and justifies
// every default.
type Model struct {
	CPU     ProfileParams `json:"cpu"`
	Memory  ProfileParams `json:"memory"`
	Network ProfileParams `json:"network"`
	// RemoteMemoryPenalty is how much longer the memory-bound share of a task takes when all of its
	// memory is on another NUMA node (the inverse of the remote-to-local bandwidth ratio, minus 1).
	RemoteMemoryPenalty float64 `json:"remoteMemoryPenalty"`
	// NUMABalancing is the fraction of remote accesses of a floating thread that the kernel's
	// automatic NUMA balancing turns into local ones (0: none, 1: all).
	NUMABalancing float64 `json:"numaBalancing"`
	// InterNodePenalty is how much longer a message between ranks on different nodes takes than one
	// through shared memory on one NUMA node.
	InterNodePenalty float64 `json:"interNodePenalty"`
	// CrossNUMAPenalty is the same for ranks on one node but different NUMA nodes.
	CrossNUMAPenalty float64 `json:"crossNUMAPenalty"`
	// BackgroundThreads is the number of busy threads of system daemons (kubelet, runtime, agents)
	// in every node's shared pool; they compete with unpinned workers only.
	BackgroundThreads float64 `json:"backgroundThreads"`
}

// DefaultModel returns the documented defaults (docs/simulator.md, "Runtime model").
func DefaultModel() Model {
	return Model{
		CPU:                 ProfileParams{MemoryShare: 0.1, BandwidthPerThread: 0.02, CommShare: 0.02, FloatingPenalty: 0.10},
		Memory:              ProfileParams{MemoryShare: 0.9, BandwidthPerThread: 0.125, CommShare: 0.02, FloatingPenalty: 0.06},
		Network:             ProfileParams{MemoryShare: 0.3, BandwidthPerThread: 0.05, CommShare: 0.6, FloatingPenalty: 0.10},
		RemoteMemoryPenalty: 0.8,
		NUMABalancing:       0,
		InterNodePenalty:    4,
		CrossNUMAPenalty:    0.3,
		BackgroundThreads:   0,
	}
}

// Params returns the parameters of one profile.
func (m *Model) Params(p v1alpha1.Profile) *ProfileParams {
	switch p {
	case v1alpha1.ProfileMemory:
		return &m.Memory
	case v1alpha1.ProfileNetwork:
		return &m.Network
	default:
		return &m.CPU
	}
}

// DecodeModel reads a model file (YAML or JSON) strictly: unknown fields, duplicate fields and
// out-of-range values are errors naming the field. Fields the file omits keep their defaults.
func DecodeModel(data []byte, source string) (Model, error) {
	m := DefaultModel()
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return Model{}, fmt.Errorf("read model %s: not valid YAML or JSON: %w", source, err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, &m)
	if err != nil {
		return Model{}, fmt.Errorf("read model %s: %w", source, err)
	}
	if len(strict) > 0 {
		return Model{}, fmt.Errorf("read model %s: %w", source, errors.Join(strict...))
	}
	if err := m.Validate(); err != nil {
		return Model{}, fmt.Errorf("read model %s: %w", source, err)
	}
	return m, nil
}

// EncodeModel writes a model as YAML, the format DecodeModel reads.
func EncodeModel(m Model) ([]byte, error) { return yaml.Marshal(m) }

// Validate checks every parameter's range.
func (m *Model) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi float64) {
		if math.IsNaN(v) || v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s = %v: must be between %v and %v", name, v, lo, hi))
		}
	}
	for _, p := range []struct {
		name string
		p    *ProfileParams
	}{{"cpu", &m.CPU}, {"memory", &m.Memory}, {"network", &m.Network}} {
		check(p.name+".memoryShare", p.p.MemoryShare, 0, 1)
		check(p.name+".bandwidthPerThread", p.p.BandwidthPerThread, 0, 1)
		check(p.name+".commShare", p.p.CommShare, 0, 1)
		check(p.name+".floatingPenalty", p.p.FloatingPenalty, 0, 10)
		if p.p.MemoryShare+p.p.CommShare > 1 {
			errs = append(errs, fmt.Errorf("%s: memoryShare + commShare = %v: the shares of one runtime cannot exceed 1",
				p.name, p.p.MemoryShare+p.p.CommShare))
		}
	}
	check("remoteMemoryPenalty", m.RemoteMemoryPenalty, 0, 10)
	check("numaBalancing", m.NUMABalancing, 0, 1)
	check("interNodePenalty", m.InterNodePenalty, 0, 100)
	check("crossNUMAPenalty", m.CrossNUMAPenalty, 0, 100)
	check("backgroundThreads", m.BackgroundThreads, 0, 1e4)
	return errors.Join(errs...)
}
