// Package plan owns gang placement on a snapshot (the fine-grained scheduling paper's Algorithms
// 3 and 4 plus gang semantics): it splits workers into task groups by least requested resources,
// filters nodes (taints, selectors and node affinity, node-level free resources, a single NUMA
// node with enough free cores, exclusive nodes) and scores them (same-group workers on the node
// plus the group's size minus other groups of the job there, or every node alike when task
// groups are off; the least- or most-loaded policy breaks ties), and accepts a plan only when every member — or MinAvailable of them — fits.
// It is pure: it reads a snapshot.Snapshot and returns placements; it must not call the API
// server, bind pods or choose CPUs (the node agent does).
package plan

import (
	"fmt"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// Policy breaks ties between equally scored nodes.
type Policy int

const (
	// LeastLoaded prefers the node with the smallest fraction of its CPU requested.
	LeastLoaded Policy = iota
	// MostLoaded prefers the node with the largest fraction of its CPU requested.
	MostLoaded
)

func (p Policy) String() string {
	if p == MostLoaded {
		return "most-loaded"
	}
	return "least-loaded"
}

// Member is one pod of a gang.
type Member struct {
	// Name is the pod's name.
	Name string
	// Group is the member's task group, 0 ≤ Group < Gang.Groups.
	Group int
	// Request is what the pod takes from its node.
	Request snapshot.Resources
	// PinnedCPUs and PinnedMemory are what the pod needs from one NUMA node (0 for a pod in the
	// shared pool).
	PinnedCPUs   int
	PinnedMemory int64
	// HostPorts are the ports the pod holds on its node's network: a node where a pod (or
	// another member placed there) holds one of them does not fit.
	HostPorts []snapshot.HostPort
	// Constraints are the pod's node constraints. Members with the same pointer are filtered
	// once; give identical constraints the same pointer.
	Constraints *Constraints
	// BoundNode is the node of a member that is already bound: Plan counts it in its group and
	// leaves it there.
	BoundNode string
}

// Gang is a set of pods placed all together or not at all.
type Gang struct {
	// Key identifies the gang (snapshot.HPCJobKey or snapshot.PodGroupKey); nodes running other
	// keys count as other jobs for ExclusiveNodes.
	Key string
	// Members are placed group by group, in this order within a group.
	Members []Member
	// Groups is Ng; every member's Group is below it.
	Groups int
	Policy Policy
	// NoTaskGroups turns task-group scheduling off (the placer's --task-groups=false): paper
	// Algorithm 4's score is the same for every node, so each member goes to the first node in
	// Policy's load order that fits it (its load counting the members this plan already put
	// there), wherever the gang's other members or groups are, as kube-scheduler's scoring
	// would place it. Groups still split the members; only the score ignores them.
	NoTaskGroups bool
	// ExclusiveNodes keeps this gang off nodes running another HPC job's workers.
	ExclusiveNodes bool
	// MinAvailable is how many members (bound ones included) must fit; 0 means all.
	MinAvailable int
	// Launcher, when set, is placed after the members in the shared pool, preferring a node with
	// the most members; the gang fails if it fits nowhere. Its Group is ignored.
	Launcher *Member
}

// Placement is where one member goes.
type Placement struct {
	// Member indexes Gang.Members.
	Member int
	Node   string
	// NUMA is the NUMA node chosen for a pinned member, -1 for a shared one.
	NUMA int
}

// Result is an accepted plan.
type Result struct {
	// Placements are the members placed by this plan, in placement order (bound members are
	// not repeated).
	Placements []Placement
	// Launcher is where the gang's launcher goes, when it has one.
	Launcher *Placement
	// Unplaced are the members that did not fit (only when MinAvailable allowed it).
	Unplaced []int
	// NodesUsed is the number of distinct nodes holding members, bound ones included.
	NodesUsed int
}

// Plan places a gang on a snapshot. It returns a *FitError when fewer than MinAvailable members
// (or the launcher) fit, and a plain error for a malformed gang.
func Plan(s *snapshot.Snapshot, g *Gang) (*Result, error) {
	if err := check(g); err != nil {
		return nil, err
	}
	p := newPlanner(s, g)
	return p.run()
}

func check(g *Gang) error {
	if g.Groups < 1 && len(g.Members) > 0 {
		return fmt.Errorf("gang %s: %d groups, want at least 1", g.Key, g.Groups)
	}
	if g.MinAvailable < 0 || g.MinAvailable > len(g.Members) {
		return fmt.Errorf("gang %s: minAvailable %d outside 0..%d members", g.Key, g.MinAvailable, len(g.Members))
	}
	for i := range g.Members {
		m := &g.Members[i]
		if m.Group < 0 || m.Group >= g.Groups {
			return fmt.Errorf("gang %s: member %s has group %d, want 0..%d", g.Key, m.Name, m.Group, g.Groups-1)
		}
		if m.Constraints == nil {
			return fmt.Errorf("gang %s: member %s has no constraints", g.Key, m.Name)
		}
	}
	if g.Launcher != nil && g.Launcher.Constraints == nil {
		return fmt.Errorf("gang %s: launcher %s has no constraints", g.Key, g.Launcher.Name)
	}
	return nil
}

// Available counts the nodes where member m of gang g could go on an otherwise unchanged
// snapshot: the "available nodes" of paper Algorithm 1.
func Available(s *snapshot.Snapshot, g *Gang, m *Member) int {
	if m.Constraints == nil {
		return 0
	}
	p := newPlanner(s, g)
	n := 0
	for _, ni := range p.classOf(m.Constraints, true).order {
		if _, k := p.fit(ni, m); k == "" {
			n++
		}
	}
	return n
}

// LargestZone is the most free CPUs any NUMA node of the snapshot offers one pinned pod (its
// own free CPUs, bounded by what its node has left for pinned pods in all).
func LargestZone(s *snapshot.Snapshot) int {
	most := 0
	for i := range s.Nodes {
		n := &s.Nodes[i]
		for _, z := range s.ZonesOf(i) {
			most = max(most, min(z.FreeCPUs, n.ExclusiveAvailable))
		}
	}
	return most
}
