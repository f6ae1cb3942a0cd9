package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// packer is one placement rule under comparison.
type packer interface {
	// admit places request id of n CPUs inside one NUMA node, or reports false.
	admit(id, n int) ([]int, bool)
	release(id int)
	// spare is how many CPUs could still be taken machine-wide without breaking the shared
	// pool's minimum.
	spare() int
	// failure is the first refusal that was not a fit problem: a bug in the comparison.
	failure() error
}

// finegrainPacker is the real allocator.
type finegrainPacker struct {
	a     *policy.Allocator
	split bool
	err   error
}

func podKey(id int) policy.Key {
	return policy.Key{PodUID: "pod-" + strconv.Itoa(id), Container: "worker"}
}

func (f *finegrainPacker) admit(id, n int) ([]int, bool) {
	asg, err := f.a.Allocate(policy.Request{Key: podKey(id), CPUs: n, AllowSplitCores: f.split})
	if nofit := (*policy.NoFitError)(nil); err != nil && !errors.As(err, &nofit) && f.err == nil {
		f.err = fmt.Errorf("request %d of %d CPUs: %w", id, n, err)
	}
	if err != nil {
		return nil, false
	}
	return asg.CPUs.List(), true
}

func (f *finegrainPacker) release(id int) { f.a.Release(podKey(id)) }

func (f *finegrainPacker) spare() int { return f.a.SharedCPUs().Size() - f.a.MinSharedCPUs() }

func (f *finegrainPacker) failure() error { return f.err }

func (k *kubeletPacker) spare() int { return k.free.Size() - k.minShared }

func (k *kubeletPacker) failure() error { return nil }

// arrival is one request of a stream: size CPUs held for life ticks.
type arrival struct{ size, life int }

// streamSpec describes a seeded random request stream for one machine.
type streamSpec struct {
	seed     uint64
	arrivals int
	// maxSize is the largest request: what one NUMA node can hold.
	maxSize int
	// unit rounds sizes up (threads per core for whole-core streams, else 1).
	unit int
	// load is the offered load: mean size × mean lifetime / machine capacity.
	load     float64
	capacity int
}

// makeStream draws sizes half small (up to 1/8 of a node), 30 % medium (up to half a node) and
// 20 % large (up to a whole node), and lifetimes uniform with the mean that gives the offered load.
func makeStream(s streamSpec) []arrival {
	rng := rand.New(rand.NewPCG(s.seed, 0x9e3779b97f4a7c15))
	between := func(lo, hi int) int { return lo + rng.IntN(max(hi-lo, 0)+1) }
	top := s.maxSize / s.unit * s.unit
	out := make([]arrival, s.arrivals)
	total := 0
	for i := range out {
		var n int
		switch u := rng.Float64(); {
		case u < 0.5:
			n = between(1, max(1, s.maxSize/8))
		case u < 0.8:
			n = between(max(1, s.maxSize/8), s.maxSize/2)
		default:
			n = between(s.maxSize/2, s.maxSize)
		}
		n = min((n+s.unit-1)/s.unit*s.unit, top)
		out[i].size = n
		total += n
	}
	meanLife := max(1, int(s.load*float64(s.capacity)*float64(len(out))/float64(total)+0.5))
	for i := range out {
		out[i].life = 1 + rng.IntN(2*meanLife-1)
	}
	return out
}

// stats is what one packer did with one stream.
type stats struct {
	offered, admitted int
	// refusedWithRoom counts refusals while the machine as a whole had room: fragmentation.
	refusedWithRoom int
	// l3Extra counts grants spread over more L3 groups than the request needed.
	l3Extra int
	// heldCPUTicks sums held CPUs over time; capacityTicks is its maximum.
	heldCPUTicks, capacityTicks int
}

func (s *stats) add(o stats) {
	s.offered += o.offered
	s.admitted += o.admitted
	s.refusedWithRoom += o.refusedWithRoom
	s.l3Extra += o.l3Extra
	s.heldCPUTicks += o.heldCPUTicks
	s.capacityTicks += o.capacityTicks
}

// run feeds a stream to a packer, one arrival per tick, releasing grants whose life has ended
// before each arrival.
func run(p packer, topo *topology.Topology, stream []arrival, capacity int) (stats, error) {
	var st stats
	ends := map[int][]int{}
	held := 0
	sizes := make([]int, len(stream))
	for tick, a := range stream {
		for _, id := range ends[tick] {
			p.release(id)
			held -= sizes[id]
		}
		delete(ends, tick)
		st.offered++
		roomy := p.spare() >= a.size
		cpus, ok := p.admit(tick, a.size)
		if !ok {
			if roomy {
				st.refusedWithRoom++
			}
		} else {
			if len(cpus) != a.size {
				return st, fmt.Errorf("request %d of %d CPUs got %d", tick, a.size, len(cpus))
			}
			st.admitted++
			if extraL3(topo, cpus) {
				st.l3Extra++
			}
			sizes[tick] = a.size
			held += a.size
			ends[tick+a.life] = append(ends[tick+a.life], tick)
		}
		st.heldCPUTicks += held
		st.capacityTicks += capacity
	}
	return st, p.failure()
}

// extraL3 reports whether cpus (all in one NUMA node) span more L3 groups than a request of their
// size needs, given the node's largest L3 group.
func extraL3(topo *topology.Topology, cpus []int) bool {
	node, _ := topo.NUMANode(topo.NUMANodeOfCPU(cpus[0]))
	largest := 0
	for _, g := range node.L3Groups {
		largest = max(largest, topo.L3Groups[g].CPUs.Size())
	}
	if largest == 0 {
		return false // the host reports no L3 groups
	}
	groups := map[topology.L3ID]bool{}
	for _, cpu := range cpus {
		c, _ := topo.CPU(cpu)
		groups[c.L3Group] = true
	}
	return len(groups) > (len(cpus)+largest-1)/largest
}
