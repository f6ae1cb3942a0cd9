package plan

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// nodeUse is what the plan has put on one node so far.
type nodeUse struct {
	node int32
	res  snapshot.Resources
	// zoneCPUs and zoneMem are taken per NUMA node, parallel to the node's snapshot zones;
	// pinned is zoneCPUs' sum.
	zoneCPUs []int
	zoneMem  []int64
	pinned   int
	// ports are the host ports of the members placed on the node.
	ports []snapshot.HostPort
	// groups counts the gang's members on the node per task group (bound ones included).
	groups  []groupCount
	members int
}

type groupCount struct{ group, count int }

// free returns alloc - requested - used for one amount.
func free(alloc, requested, used int64) int64 { return alloc - requested - used }

// nodeFits checks node-level resources; it returns the kind of the first shortage, or "".
func nodeFits(n *snapshot.Node, u *nodeUse, r *snapshot.Resources) Kind {
	var used *snapshot.Resources
	if u != nil {
		used = &u.res
	} else {
		used = &snapshot.Resources{}
	}
	a, q := &n.Allocatable, &n.Requested
	switch {
	case r.MilliCPU > 0 && free(a.MilliCPU, q.MilliCPU, used.MilliCPU) < r.MilliCPU:
		return KindCPU
	case r.Memory > 0 && free(a.Memory, q.Memory, used.Memory) < r.Memory:
		return KindMemory
	case r.EphemeralStorage > 0 && free(a.EphemeralStorage, q.EphemeralStorage, used.EphemeralStorage) < r.EphemeralStorage:
		return KindStorage
	case r.Pods > 0 && free(a.Pods, q.Pods, used.Pods) < r.Pods:
		return KindPods
	}
	for _, s := range r.Scalars {
		if free(a.Scalar(s.Name), q.Scalar(s.Name), used.Scalar(s.Name)) < s.Value {
			return KindExtended
		}
	}
	return ""
}

// firstScalarShort names the first extended resource the node lacks.
func firstScalarShort(n *snapshot.Node, u *nodeUse, r *snapshot.Resources) string {
	for _, s := range r.Scalars {
		used := int64(0)
		if u != nil {
			used = u.res.Scalar(s.Name)
		}
		if free(n.Allocatable.Scalar(s.Name), n.Requested.Scalar(s.Name), used) < s.Value {
			return string(s.Name)
		}
	}
	return ""
}

// zoneFor picks the NUMA node (an index into the node's zones) for a pinned member of node n:
// the one left fullest after the member (best fit, as the node agent packs), lowest ID on ties.
// A zone offers its own free CPUs, but never more than the node has left for pinned pods in all
// (n.ExclusiveAvailable: the agent keeps a minimum shared pool across its NUMA nodes). It returns
// -1 and the most CPUs any zone offers when none fits.
func zoneFor(n *snapshot.Node, zones []snapshot.Zone, u *nodeUse, m *Member) (zone, largest int) {
	zone, largest = -1, 0
	bestLeft := 0
	nodeLeft := n.ExclusiveAvailable
	if u != nil {
		nodeLeft -= u.pinned
	}
	for i := range zones {
		z := &zones[i]
		cpus, mem := z.FreeCPUs, z.FreeMemory
		if u != nil {
			cpus -= u.zoneCPUs[i]
			mem -= u.zoneMem[i]
		}
		cpus = min(cpus, nodeLeft)
		largest = max(largest, cpus)
		if cpus < m.PinnedCPUs || (z.FreeMemory >= 0 && mem < m.PinnedMemory) {
			continue
		}
		left := cpus - m.PinnedCPUs
		if zone < 0 || left < bestLeft || (left == bestLeft && z.NUMA < zones[zone].NUMA) {
			zone, bestLeft = i, left
		}
	}
	return zone, largest
}

// portTaken returns the first of m's host ports that a pod on node n or a member the plan put
// there holds.
func portTaken(n *snapshot.Node, u *nodeUse, m *Member) (snapshot.HostPort, bool) {
	for _, h := range m.HostPorts {
		if n.HostPortInUse(h) {
			return h, true
		}
		if u != nil && slices.Contains(u.ports, h) {
			return h, true
		}
	}
	return snapshot.HostPort{}, false
}

// fit checks whether member m fits node ni given the plan so far. It returns the zone index for
// a pinned member (-1 for a shared one) and "" on success, or the kind of the first failure.
func (p *planner) fit(ni int32, m *Member) (int, Kind) {
	n := &p.s.Nodes[ni]
	u := p.use(ni)
	if k := nodeFits(n, u, &m.Request); k != "" {
		return -1, k
	}
	if _, taken := portTaken(n, u, m); taken {
		return -1, KindPorts
	}
	if m.PinnedCPUs == 0 {
		return -1, ""
	}
	if n.TopologyProblem != "" {
		return -1, KindTopology
	}
	z, _ := zoneFor(n, p.s.ZonesOf(int(ni)), u, m)
	if z < 0 {
		return -1, KindNUMA
	}
	return z, ""
}

// fitReason explains in detail why m does not fit node ni, or returns nil when it does.
func (p *planner) fitReason(ni int32, m *Member) *reason {
	n := &p.s.Nodes[ni]
	u := p.use(ni)
	switch k := nodeFits(n, u, &m.Request); k {
	case "":
	case KindExtended:
		return &reason{kind: k, detail: firstScalarShort(n, u, &m.Request)}
	default:
		return &reason{kind: k, detail: string(k)}
	}
	if h, taken := portTaken(n, u, m); taken {
		return &reason{kind: KindPorts, detail: h.String()}
	}
	if m.PinnedCPUs == 0 {
		return nil
	}
	if n.TopologyProblem != "" {
		return &reason{kind: KindTopology, detail: n.TopologyProblem}
	}
	z, largest := zoneFor(n, p.s.ZonesOf(int(ni)), u, m)
	if z >= 0 {
		return nil
	}
	detail := strconv.Itoa(m.PinnedCPUs) + " free " + plural(m.PinnedCPUs, "CPU")
	if m.PinnedMemory > 0 {
		detail += " and " + formatBytes(m.PinnedMemory) + " free memory"
	}
	return &reason{kind: KindNUMA, detail: detail, largest: largest}
}

// loadCmp compares the CPU load (requested / allocatable, this plan included) of two nodes:
// negative when a is less loaded.
func (p *planner) loadCmp(a, b int32) int {
	ua, aa := p.cpuLoad(a)
	ub, ab := p.cpuLoad(b)
	return snapshot.CompareLoad(ua, aa, ub, ab)
}

func (p *planner) cpuLoad(ni int32) (used, alloc int64) {
	n := &p.s.Nodes[ni]
	used = n.Requested.MilliCPU
	if u := p.use(ni); u != nil {
		used += u.res.MilliCPU
	}
	return used, n.Allocatable.MilliCPU
}

// formatBytes prints a byte count as a Kubernetes quantity ("8Gi").
func formatBytes(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }
