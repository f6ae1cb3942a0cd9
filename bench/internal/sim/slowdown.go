package sim

import (
	"slices"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Placed is one worker of a running job as the runtime model sees it.
type Placed struct {
	// Node indexes the cluster's nodes.
	Node int
	// Tasks is the MPI ranks the worker runs; Threads its busy threads (tasks × CPUs per task).
	Tasks, Threads int
	// CPUs, for a pinned worker, counts its exclusive CPUs per NUMA node (indexed like the
	// machine's NUMA nodes). It is nil for a floating worker, which runs anywhere in its node's
	// shared pool.
	CPUs []int
}

// Pinned reports whether the worker holds exclusive CPUs.
func (p *Placed) Pinned() bool { return p.CPUs != nil }

// Running is one running job as the runtime model sees it.
type Running struct {
	Profile v1alpha1.Profile
	Workers []Placed
}

// Factors are a job's slowdown factors at one moment. NUMA, Bandwidth and Interference are those
// of its slowest worker (an MPI job advances at the pace of its slowest rank); Total is the
// product of the four, the factor its base runtime is stretched by while the cluster stays as it
// is.
type Factors struct {
	NUMA, Bandwidth, Interference, Comm, Total float64
}

// Load is what running jobs put on each node: the shared pool left by pinned workers, the busy
// threads floating in it, and the memory-bandwidth demand on each NUMA node.
type Load struct {
	numaCPUs []int
	nodes    []nodeLoad
}

type nodeLoad struct {
	// pool counts the shared pool's CPUs per NUMA node; poolSize is their sum.
	pool     []int
	poolSize int
	// floating is the busy threads in the shared pool, background threads included.
	floating float64
	// demand is the bandwidth demand per NUMA node, in units of the node's bandwidth.
	demand []float64
}

// NewLoad computes the load of jobs on a cluster of nodes machines whose NUMA nodes have numaCPUs
// online CPUs each.
func (m *Model) NewLoad(numaCPUs []int, nodes int, jobs []Running) *Load {
	l := &Load{numaCPUs: numaCPUs, nodes: make([]nodeLoad, nodes)}
	for i := range l.nodes {
		n := &l.nodes[i]
		n.pool = append([]int(nil), numaCPUs...)
		n.demand = make([]float64, len(numaCPUs))
		n.floating = m.BackgroundThreads
	}
	for _, j := range jobs {
		for _, w := range j.Workers {
			if w.Pinned() {
				for z, c := range w.CPUs {
					l.nodes[w.Node].pool[z] -= c
				}
			}
		}
	}
	for i := range l.nodes {
		n := &l.nodes[i]
		for _, c := range n.pool {
			n.poolSize += c
		}
	}
	for _, j := range jobs {
		bw := m.Params(j.Profile).BandwidthPerThread
		for _, w := range j.Workers {
			n := &l.nodes[w.Node]
			if !w.Pinned() {
				n.floating += float64(w.Threads)
			}
			for z := range n.demand {
				n.demand[z] += bw * float64(w.Threads) * l.share(&w, z)
			}
		}
	}
	return l
}

// share is the fraction of worker w's time spent on NUMA node z: its CPUs there over all its
// CPUs when pinned, the pool's when floating (the machine's when the pool is empty).
func (l *Load) share(w *Placed, z int) float64 {
	cpus, total := w.CPUs, 0
	if !w.Pinned() {
		cpus = l.nodes[w.Node].pool
		if l.nodes[w.Node].poolSize == 0 {
			cpus = l.numaCPUs
		}
	}
	for _, c := range cpus {
		total += c
	}
	if total == 0 {
		return 0
	}
	return float64(cpus[z]) / float64(total)
}

// Slowdown returns a running job's factors under load l (which must include the job).
//
//   - NUMA: a worker whose threads move over several NUMA nodes finds a share r = 1 − Σ p_z² of
//     its memory on another node (p_z: the share of its time on node z), of which automatic
//     NUMA balancing recovers NUMABalancing; NUMA = 1 + memoryShare × r' × RemoteMemoryPenalty.
//   - Bandwidth: a NUMA node whose threads demand D > 1 of its bandwidth serves each at 1/D;
//     Bandwidth = (1 − memoryShare) + memoryShare × Σ p_z max(1, D_z).
//   - Interference (floating workers only): the shared pool busy at U = threads / CPUs stretches
//     a thread by max(1, U) × (1 + floatingPenalty × min(1, U)).
//   - Comm: of the job's rank pairs, f_node talk across nodes and f_numa across NUMA nodes of
//     one node; Comm = 1 + commShare × (f_node × InterNodePenalty + f_numa × CrossNUMAPenalty).
func (m *Model) Slowdown(l *Load, j *Running) Factors {
	pp := m.Params(j.Profile)
	worst := Factors{NUMA: 1, Bandwidth: 1, Interference: 1}
	worstProduct := 0.0
	for i := range j.Workers {
		w := &j.Workers[i]
		n := &l.nodes[w.Node]
		sumSq, bw := 0.0, 0.0
		for z := range n.demand {
			p := l.share(w, z)
			sumSq += p * p
			bw += p * max(1, n.demand[z])
		}
		f := Factors{
			NUMA:         1 + pp.MemoryShare*(1-sumSq)*(1-m.NUMABalancing)*m.RemoteMemoryPenalty,
			Bandwidth:    (1 - pp.MemoryShare) + pp.MemoryShare*bw,
			Interference: 1,
		}
		if !w.Pinned() {
			u := n.floating / float64(max(n.poolSize, 1))
			f.Interference = max(1, u) * (1 + pp.FloatingPenalty*min(1, u))
		}
		if p := f.NUMA * f.Bandwidth * f.Interference; p > worstProduct {
			worst, worstProduct = f, p
		}
	}
	fNode, fNUMA := l.pairShares(j)
	worst.Comm = 1 + pp.CommShare*(fNode*m.InterNodePenalty+fNUMA*m.CrossNUMAPenalty)
	worst.Total = worst.NUMA * worst.Bandwidth * worst.Interference * worst.Comm
	return worst
}

// pairShares returns the fractions of a job's rank pairs that lie on different nodes and on
// different NUMA nodes of one node (tasks of a floating worker are spread over NUMA nodes by
// its time shares). Sums run in worker order, so the result is exactly reproducible.
func (l *Load) pairShares(j *Running) (crossNode, crossNUMA float64) {
	total := 0
	zones := len(l.numaCPUs)
	var nodes []int
	var perNode, perNUMA []float64
	for i := range j.Workers {
		w := &j.Workers[i]
		total += w.Tasks
		k := slices.Index(nodes, w.Node)
		if k < 0 {
			k = len(nodes)
			nodes = append(nodes, w.Node)
			perNode = append(perNode, 0)
			perNUMA = append(perNUMA, make([]float64, zones)...)
		}
		perNode[k] += float64(w.Tasks)
		for z := 0; z < zones; z++ {
			perNUMA[k*zones+z] += float64(w.Tasks) * l.share(w, z)
		}
	}
	if total < 2 {
		return 0, 0
	}
	pairs := float64(total) * float64(total-1)
	sameNode, sameNUMA := 0.0, 0.0
	for _, t := range perNode {
		sameNode += t * (t - 1)
	}
	for _, t := range perNUMA {
		sameNUMA += max(0, t*(t-1))
	}
	crossNode = 1 - sameNode/pairs
	crossNUMA = max(0, (sameNode-sameNUMA)/pairs)
	return crossNode, crossNUMA
}
