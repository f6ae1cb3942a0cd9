package policy

import (
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// place validates a request and chooses the NUMA node (its position in topo.NUMANodes) that will
// hold it, or returns the typed error Allocate reports. It changes nothing.
func (a *Allocator) place(req Request) (int, error) {
	n := req.CPUs
	if n <= 0 {
		return -1, &InvalidCountError{Key: req.Key, Requested: n}
	}
	required, isRequired := req.NUMANode.Node()
	reqNode := -1
	if isRequired {
		reqNode = a.topo.NUMANodeIndex(required)
		if reqNode < 0 {
			return -1, &UnknownNUMANodeError{Key: req.Key, NUMANode: required, Known: a.cpuNodeIDs()}
		}
		if a.nodes[reqNode].capacity == 0 {
			return -1, &MemoryOnlyNUMANodeError{Key: req.Key, NUMANode: required}
		}
	}
	split := a.splits(req)
	if !split && n%a.tpc != 0 {
		return -1, &SMTAlignmentError{Key: req.Key, Requested: n, CPUsPerCore: a.tpc}
	}

	limit := 0
	for ni := range a.nodes {
		if reqNode < 0 || ni == reqNode {
			limit = max(limit, a.limit(ni, split))
		}
	}
	if n > limit {
		id := topology.NoNUMA
		if isRequired {
			id = required
		}
		return -1, &TooLargeError{Key: req.Key, Requested: n, NUMANode: id, Limit: limit, NodeCPUs: a.topo.NumCPUs()}
	}

	sharedOK := a.totalFree-n >= a.minShared
	best := -1
	for ni := range a.nodes {
		if (reqNode >= 0 && ni != reqNode) || a.units(ni, split) < n {
			continue
		}
		if best < 0 || a.betterNode(ni, best, n, split) {
			best = ni
		}
	}
	if best < 0 || !sharedOK {
		id := topology.NoNUMA
		if isRequired {
			id = required
		}
		return -1, &NoFitError{
			Key: req.Key, Requested: n, NUMANode: id, WholeCores: !split && a.tpc > 1,
			Free: a.freeList(), SharedLimited: best >= 0, SharedFree: a.totalFree, SharedMinimum: a.minShared,
		}
	}
	return best, nil
}

// limit is the most CPUs one request could ever get on node ni, the machine being otherwise empty.
func (a *Allocator) limit(ni int, split bool) int {
	ns := &a.nodes[ni]
	if split {
		return min(ns.allocatable, a.allocatable-a.minShared)
	}
	return min(ns.allocWhole, (a.allocatable-a.minShared)/a.tpc) * a.tpc
}

// units is how many CPUs node ni can give a request now.
func (a *Allocator) units(ni int, split bool) int {
	if split {
		return a.nodes[ni].free
	}
	return a.nodes[ni].whole * a.tpc
}

// betterNode orders candidate nodes for a request of n CPUs: partly used before empty, then one
// where the whole cores fit in one L3 group, then fullest, then lowest position.
func (a *Allocator) betterNode(x, y, n int, split bool) bool {
	nx, ny := &a.nodes[x], &a.nodes[y]
	if ex, ey := nx.empty(), ny.empty(); ex != ey {
		return ey
	}
	if ox, oy := a.fitsOneCluster(x, n, split), a.fitsOneCluster(y, n, split); ox != oy {
		return ox
	}
	if ux, uy := a.units(x, split), a.units(y, split); ux != uy {
		return ux < uy
	}
	return x < y
}

func (a *Allocator) fitsOneCluster(ni, n int, split bool) bool {
	need := n / a.tpc
	for _, c := range a.nodes[ni].clusters {
		if cl := &a.clusters[c]; cl.whole >= need && (!split || cl.free >= n) {
			return true
		}
	}
	return false
}

// pick takes n CPUs of node ni into slot s; place has checked that they are there.
func (a *Allocator) pick(s int32, ni, n int, split bool) {
	a.touched = a.touched[:0]
	cores := min(n/a.tpc, a.nodes[ni].whole)
	a.pickWholeCores(s, ni, cores, n)
	if rest := n - cores*a.tpc; rest > 0 {
		a.pickThreads(s, ni, rest)
	}
}

// pickWholeCores takes cores whole cores of node ni for a request still needing n CPUs: from the
// best-fitting cluster that holds them all, else the cluster with most free cores whole, then
// again for the rest.
func (a *Allocator) pickWholeCores(s int32, ni, cores, n int) {
	for cores > 0 {
		best, largest := -1, -1
		for _, c := range a.nodes[ni].clusters {
			cl := &a.clusters[c]
			if cl.whole >= cores && (best < 0 || a.betterCluster(c, best, n)) {
				best = c
			}
			if cl.whole > 0 && (largest < 0 || cl.whole > a.clusters[largest].whole) {
				largest = c
			}
		}
		if best < 0 {
			best = largest
		}
		take := min(cores, a.clusters[best].whole)
		a.takeWholeCores(s, best, take)
		cores -= take
		n -= take * a.tpc
	}
}

// betterCluster orders clusters that hold the request's remaining whole cores: one that also
// holds all n CPUs still needed, then partly used before empty, then fullest, then lowest index.
func (a *Allocator) betterCluster(x, y, n int) bool {
	cx, cy := &a.clusters[x], &a.clusters[y]
	if ax, ay := cx.free >= n, cy.free >= n; ax != ay {
		return ax
	}
	if ex, ey := cx.empty(), cy.empty(); ex != ey {
		return ey
	}
	if cx.whole != cy.whole {
		return cx.whole < cy.whole
	}
	return x < y
}

func (a *Allocator) takeWholeCores(s int32, c, count int) {
	a.touched = append(a.touched, c)
	for _, ci := range a.clusters[c].cores {
		if count == 0 {
			return
		}
		if a.whole(ci) {
			for _, cpu := range a.coreCPUs[ci] {
				a.take(s, cpu)
			}
			count--
		}
	}
}

// pickThreads takes n single threads of node ni: first free threads of partly used cores, then
// threads of free cores, each time in the clusters this request already uses first, then the
// fullest clusters.
func (a *Allocator) pickThreads(s int32, ni, n int) {
	order := append(a.order[:0], a.touched...)
	rest := len(order)
	for _, c := range a.nodes[ni].clusters {
		if a.clusters[c].free > 0 && !contains(a.touched, c) {
			order = append(order, c)
		}
	}
	for i := rest + 1; i < len(order); i++ { // insertion sort of the untouched clusters, fullest first
		for j := i; j > rest && a.clusters[order[j]].free < a.clusters[order[j-1]].free; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	a.order = order
	for _, partial := range []bool{true, false} {
		for _, c := range order {
			for _, ci := range a.clusters[c].cores {
				if a.coreFree[ci] == 0 || a.whole(ci) == partial {
					continue
				}
				for _, cpu := range a.coreCPUs[ci] {
					if a.owner[cpu] != ownerFree {
						continue
					}
					a.take(s, cpu)
					if n--; n == 0 {
						return
					}
				}
			}
		}
	}
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// cpuNodeIDs lists the IDs of the NUMA nodes that have CPUs.
func (a *Allocator) cpuNodeIDs() []topology.NUMAID {
	ids := []topology.NUMAID{}
	for ni, ns := range a.nodes {
		if ns.capacity > 0 {
			ids = append(ids, a.topo.NUMANodes[ni].ID)
		}
	}
	return ids
}
