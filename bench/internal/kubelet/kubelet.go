// Package kubelet is finegrain's one model of the kubelet's static CPU manager: how it picks a
// container's exclusive CPUs (takeByTopologyNUMAPacked with the default "packed" CPU sorting
// and no uncore-cache alignment) and, under the topology manager's single-numa-node policy,
// which NUMA node it admits a container on. The packing benchmark (bench/packing) and the
// simulator (bench/internal/sim) both call it, so that the rule finegrain is compared against is
// written once. It is written from the kubelet's documentation and source (pkg/kubelet/cm/
// cpumanager/cpu_assignment.go), not copied from them; it decides nothing for finegrain itself
// and must not touch a host.
package kubelet

import (
	"cmp"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// CPUManager is the static CPU manager of one kind of machine. It keeps no state of its own:
// the caller keeps each machine's Free and passes it in.
type CPUManager struct {
	topo *topology.Topology
	// nodes, sockets and cores are the machine's parts with CPUs; socketsFirst is true when a
	// socket holds several NUMA nodes, which makes the kubelet order sockets before NUMA nodes.
	nodes, sockets, cores []part
	socketsFirst          bool
	maxCPU                int
}

// part is a NUMA node, socket or core: its ID, its online CPUs, and the parts inside it (a
// node's cores, a socket's NUMA nodes) or holding it (a node's sockets).
type part struct {
	id     int
	cpus   []int
	inside []int
	around []int
}

// New models the static CPU manager of topo.
func New(topo *topology.Topology) *CPUManager {
	m := &CPUManager{topo: topo, maxCPU: topo.OnlineCPUs.List()[topo.NumCPUs()-1]}
	for _, n := range topo.NUMANodes {
		if n.CPUs.IsEmpty() {
			continue
		}
		p := part{id: int(n.ID), cpus: n.CPUs.List()}
		for _, c := range n.Cores {
			p.inside = append(p.inside, int(c))
		}
		for _, s := range topo.Sockets {
			if slices.Contains(s.NUMANodes, n.ID) {
				p.around = append(p.around, int(s.ID))
			}
		}
		m.nodes = append(m.nodes, p)
	}
	for _, s := range topo.Sockets {
		p := part{id: int(s.ID), cpus: s.CPUs.List()}
		for _, n := range s.NUMANodes {
			p.inside = append(p.inside, int(n))
		}
		m.sockets = append(m.sockets, p)
	}
	for _, c := range topo.Cores {
		m.cores = append(m.cores, part{id: int(c.ID), cpus: c.CPUs.List()})
	}
	m.socketsFirst = len(m.sockets) < len(m.nodes)
	return m
}

// Free is which CPUs the static policy may still hand out (neither reserved nor held), indexed
// by CPU number: what a caller keeps per machine and the calls below read and take from.
type Free []bool

// Free returns a Free holding cpus.
func (m *CPUManager) Free(cpus cpuset.CPUSet) Free {
	f := make(Free, m.maxCPU+1)
	for _, cpu := range cpus.UnsortedList() {
		if cpu <= m.maxCPU {
			f[cpu] = true
		}
	}
	return f
}

// Size is how many CPUs are free.
func (f Free) Size() int {
	n := 0
	for _, ok := range f {
		if ok {
			n++
		}
	}
	return n
}

// Release makes cpus free again.
func (f Free) Release(cpus []int) {
	for _, cpu := range cpus {
		f[cpu] = true
	}
}

// SingleNUMANode is the topology manager's single-numa-node admission: the lowest-numbered NUMA
// node with at least n free CPUs (the CPU manager offers a hint for every such node, and among
// equally narrow hints the lowest wins), or false when none has them (a TopologyAffinityError:
// the pod is rejected).
func (m *CPUManager) SingleNUMANode(free Free, n int) (topology.NUMAID, bool) {
	a := &accumulator{m: m, avail: free}
	for _, node := range m.nodes { // ascending ID
		if a.count(node) >= n {
			return topology.NUMAID(node.id), true
		}
	}
	return topology.NoNUMA, false
}

// TakePacked takes n free CPUs the way the kubelet's static policy chooses them — from NUMA
// node within, or from the whole machine when within is topology.NoNUMA — and returns them in
// the order it took them; it takes nothing and returns false when fewer than n are free there.
// The rule, step by step:
//  1. whole NUMA nodes, then whole sockets (sockets first when a socket holds several NUMA
//     nodes), while the request still needs at least a whole one: a node or socket counts as
//     whole only when every one of its online CPUs is free — reserved CPUs make it never whole;
//  2. whole cores (every online thread free), while the request still needs a core's worth;
//  3. single threads.
//
// Each step visits the NUMA nodes (or sockets) with the fewest free CPUs first, then the cores
// with the fewest free threads, lowest ID breaking ties and threads in CPU order: the request
// packs into the fullest part of the machine.
func (m *CPUManager) TakePacked(free Free, n int, within topology.NUMAID) ([]int, bool) {
	a := &accumulator{m: m, avail: slices.Clone(free), needed: n}
	if within != topology.NoNUMA {
		clear(a.avail)
		for _, cpu := range m.topo.CPUsOfNUMANode(within).UnsortedList() {
			a.avail[cpu] = free[cpu]
		}
	}
	if a.avail.Size() < n {
		return nil, false
	}
	if m.socketsFirst {
		a.takeWhole(a.socketOrder())
		a.takeWhole(a.nodeOrder())
	} else {
		a.takeWhole(a.nodeOrder())
		a.takeWhole(a.socketOrder())
	}
	a.takeWhole(a.coreOrder())
	a.takeThreads()
	for _, cpu := range a.taken {
		free[cpu] = false
	}
	return a.taken, true
}

// accumulator is one call: which CPUs are still free, those taken, how many to go.
type accumulator struct {
	m      *CPUManager
	avail  Free
	taken  []int
	needed int
}

// count is how many of a part's CPUs are available.
func (a *accumulator) count(p part) int {
	n := 0
	for _, cpu := range p.cpus {
		if a.avail[cpu] {
			n++
		}
	}
	return n
}

// takeWhole takes every part, in order, that is wholly available while the request needs at
// least all of it.
func (a *accumulator) takeWhole(parts []part) {
	for _, p := range parts {
		if a.needed >= len(p.cpus) && a.count(p) == len(p.cpus) {
			for _, cpu := range p.cpus {
				a.avail[cpu] = false
			}
			a.taken = append(a.taken, p.cpus...)
			a.needed -= len(p.cpus)
		}
	}
}

func (a *accumulator) takeThreads() {
	for _, c := range a.coreOrder() {
		for _, cpu := range c.cpus {
			if a.needed == 0 {
				return
			}
			if a.avail[cpu] {
				a.avail[cpu] = false
				a.taken = append(a.taken, cpu)
				a.needed--
			}
		}
	}
}

// ordered keeps the parts with free CPUs (the only ones the kubelet looks at), those with the
// fewest first, lowest ID breaking ties.
func (a *accumulator) ordered(parts []part) []part {
	type counted struct {
		part
		free int
	}
	var c []counted
	for _, p := range parts {
		if n := a.count(p); n > 0 {
			c = append(c, counted{p, n})
		}
	}
	slices.SortStableFunc(c, func(x, y counted) int { return cmp.Or(cmp.Compare(x.free, y.free), cmp.Compare(x.id, y.id)) })
	out := make([]part, len(c))
	for i := range c {
		out[i] = c[i].part
	}
	return out
}

// nested orders inner parts group by group: for each outer part in order, the inner parts link
// names (once each, those seen under an earlier group left out), fewest free CPUs first.
func (a *accumulator) nested(outer, inner []part, link func(part) []int) []part {
	var out []part
	seen := map[int]bool{}
	for _, o := range outer {
		var group []part
		for _, p := range inner {
			if slices.Contains(link(o), p.id) && !seen[p.id] {
				seen[p.id] = true
				group = append(group, p)
			}
		}
		out = append(out, a.ordered(group)...)
	}
	return out
}

// nodeOrder lists the NUMA nodes, fewest free CPUs first: globally, or socket by socket in
// socketOrder when sockets come first.
func (a *accumulator) nodeOrder() []part {
	if !a.m.socketsFirst {
		return a.ordered(a.m.nodes)
	}
	return a.nested(a.socketOrder(), a.m.nodes, func(s part) []int { return s.inside })
}

// socketOrder lists the sockets, fewest free CPUs first: globally when sockets come first, else
// NUMA node by NUMA node in nodeOrder.
func (a *accumulator) socketOrder() []part {
	if a.m.socketsFirst {
		return a.ordered(a.m.sockets)
	}
	return a.nested(a.nodeOrder(), a.m.sockets, func(n part) []int { return n.around })
}

// coreOrder lists the cores, NUMA node by NUMA node in nodeOrder, within a node the cores with
// the fewest free threads first.
func (a *accumulator) coreOrder() []part {
	return a.nested(a.nodeOrder(), a.m.cores, func(n part) []int { return n.inside })
}
