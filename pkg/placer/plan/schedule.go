package plan

import (
	"cmp"
	"slices"
	"strings"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// planner holds one Plan call's working state over an immutable snapshot.
//
// Speed: a member's best node is either a node already holding members of this gang (few) or
// the best untouched node, which is the same for every member with the same demand until it is
// touched. Untouched nodes are kept per constraint class in tie-break order and scanned by one
// cursor per distinct demand that only moves forward: an untouched node never changes, so one
// that failed a demand fails it for the rest of the plan. Scores of untouched nodes are all
// equal to the group size, and a node holding only other groups scores below it, so those are
// scanned only when nothing better fits (with task groups off every node scores 0, so every
// touched node is compared with the best untouched one by load). Results equal scoring every node for every member
// (plan_test.go checks this against a brute-force planner).
type planner struct {
	s *snapshot.Snapshot
	g *Gang
	// useOf maps a node index to its nodeUse index, -1 while untouched.
	useOf      []int32
	uses       []nodeUse
	groupSize  []int
	groupNodes [][]int32
	// byLoad is every node index in tie-break order (policy, then name).
	byLoad  []int32
	classes map[classKey]*class
	demands map[demandKey]*demand
}

// class is the nodes admitted by one set of constraints (and, for workers, the exclusive
// filter).
type class struct {
	// order is the admitted nodes in tie-break order.
	order []int32
	// admits is indexed by node.
	admits []bool
}

type classKey struct {
	c         *Constraints
	exclusive bool
}

type demand struct {
	class  *class
	cursor int
	// dead marks touched nodes this demand no longer fits: a plan only ever adds load, so a
	// node that failed a demand fails it for the rest of the plan.
	dead []bool
}

type demandKey struct {
	c                       *Constraints
	cpu, mem, storage, pods int64
	scalars                 string
	ports                   string
	pinnedCPUs              int
	pinnedMem               int64
	exclusive               bool
}

type candidate struct {
	node  int32
	zone  int
	score int
}

var noCandidate = candidate{node: -1}

func newPlanner(s *snapshot.Snapshot, g *Gang) *planner {
	p := &planner{
		s: s, g: g,
		useOf:      make([]int32, len(s.Nodes)),
		groupSize:  make([]int, max(g.Groups, 1)),
		groupNodes: make([][]int32, max(g.Groups, 1)),
		classes:    map[classKey]*class{},
		demands:    map[demandKey]*demand{},
	}
	for i := range p.useOf {
		p.useOf[i] = -1
	}
	for i := range g.Members {
		p.groupSize[g.Members[i].Group]++
	}
	p.byLoad = s.ByLoad(g.Policy == MostLoaded)
	return p
}

func (p *planner) use(ni int32) *nodeUse {
	if i := p.useOf[ni]; i >= 0 {
		return &p.uses[i]
	}
	return nil
}

func (p *planner) touch(ni int32) *nodeUse {
	if u := p.use(ni); u != nil {
		return u
	}
	nz := len(p.s.ZonesOf(int(ni)))
	p.useOf[ni] = int32(len(p.uses))
	p.uses = append(p.uses, nodeUse{node: ni, zoneCPUs: make([]int, nz), zoneMem: make([]int64, nz)})
	return &p.uses[len(p.uses)-1]
}

func (p *planner) addMember(ni int32, group int) {
	u := p.touch(ni)
	u.members++
	for i := range u.groups {
		if u.groups[i].group == group {
			u.groups[i].count++
			return
		}
	}
	u.groups = append(u.groups, groupCount{group: group, count: 1})
	p.groupNodes[group] = append(p.groupNodes[group], ni)
}

// classOf returns the nodes a constraint set admits, computing them once per plan.
func (p *planner) classOf(c *Constraints, exclusive bool) *class {
	key := classKey{c, exclusive}
	if cl, ok := p.classes[key]; ok {
		return cl
	}
	cl := &class{admits: make([]bool, len(p.s.Nodes))}
	for _, ni := range p.byLoad {
		n := &p.s.Nodes[ni]
		if !admits(n, c) || (exclusive && exclusiveReason(n, p.g) != nil) {
			continue
		}
		cl.order = append(cl.order, ni)
		cl.admits[ni] = true
	}
	p.classes[key] = cl
	return cl
}

// demandOf returns the cursor shared by members with the same constraints and requests.
// Workers are filtered for exclusive nodes; the launcher is not.
func (p *planner) demandOf(m *Member, exclusive bool) *demand {
	k := demandKey{
		c: m.Constraints, cpu: m.Request.MilliCPU, mem: m.Request.Memory,
		storage: m.Request.EphemeralStorage, pods: m.Request.Pods,
		pinnedCPUs: m.PinnedCPUs, pinnedMem: m.PinnedMemory, exclusive: exclusive,
	}
	if len(m.Request.Scalars) > 0 {
		var b strings.Builder
		for _, s := range m.Request.Scalars {
			b.WriteString(string(s.Name))
			b.WriteByte('=')
			b.WriteString(formatBytes(s.Value))
			b.WriteByte(';')
		}
		k.scalars = b.String()
	}
	if len(m.HostPorts) > 0 {
		var b strings.Builder
		for _, h := range m.HostPorts {
			b.WriteString(h.String())
			b.WriteByte(';')
		}
		k.ports = b.String()
	}
	d, ok := p.demands[k]
	if !ok {
		d = &demand{class: p.classOf(m.Constraints, exclusive)}
		p.demands[k] = d
	}
	return d
}

// untouched returns the best untouched node that fits m, in tie-break order.
func (p *planner) untouched(d *demand, m *Member) (int32, int) {
	order := d.class.order
	for ; d.cursor < len(order); d.cursor++ {
		ni := order[d.cursor]
		if p.useOf[ni] >= 0 {
			continue
		}
		if z, k := p.fit(ni, m); k == "" {
			return ni, z
		}
	}
	return -1, -1
}

// better reports whether a beats b: higher score, then the policy's load order, then name.
func (p *planner) better(a, b candidate) bool {
	if b.node < 0 {
		return a.node >= 0
	}
	if a.node < 0 {
		return false
	}
	if a.score != b.score {
		return a.score > b.score
	}
	c := p.loadCmp(a.node, b.node)
	if p.g.Policy == MostLoaded {
		c = -c
	}
	if c != 0 {
		return c < 0
	}
	return a.node < b.node
}

// score is paper Algorithm 4's node score for a member of group g; 0 for every node when the
// gang has task groups off.
func (p *planner) score(u *nodeUse, g int) int {
	if p.g.NoTaskGroups {
		return 0
	}
	same, others := 0, 0
	if u != nil {
		for _, gc := range u.groups {
			if gc.group == g {
				same = gc.count
			} else {
				others++
			}
		}
	}
	return same + p.groupSize[g] - others
}

// chooseWorker finds the best node for member m of the gang, or noCandidate.
func (p *planner) chooseWorker(m *Member) candidate {
	best := noCandidate
	consider := func(ni int32, zone int) {
		c := candidate{node: ni, zone: zone, score: p.score(p.use(ni), m.Group)}
		if p.better(c, best) {
			best = c
		}
	}
	d := p.demandOf(m, true)
	for _, ni := range p.groupNodes[m.Group] {
		if z, ok := p.fitTouched(d, ni, m); ok {
			consider(ni, z)
		}
	}
	if ni, z := p.untouched(d, m); ni >= 0 {
		consider(ni, z)
	}
	if best.node >= 0 && best.score >= p.groupSize[m.Group] {
		return best
	}
	for i := range p.uses {
		ni := p.uses[i].node
		if z, ok := p.fitTouched(d, ni, m); ok {
			consider(ni, z)
		}
	}
	return best
}

// fitTouched checks a touched node for a demand, remembering nodes it will never fit again.
func (p *planner) fitTouched(d *demand, ni int32, m *Member) (int, bool) {
	if !d.class.admits[ni] || (d.dead != nil && d.dead[ni]) {
		return -1, false
	}
	z, k := p.fit(ni, m)
	if k == "" {
		return z, true
	}
	if d.dead == nil {
		d.dead = make([]bool, len(p.s.Nodes))
	}
	d.dead[ni] = true
	return -1, false
}

// chooseLauncher prefers the node with the most members, then the policy's order.
func (p *planner) chooseLauncher(m *Member) candidate {
	best := noCandidate
	d := p.demandOf(m, false)
	for i := range p.uses {
		u := &p.uses[i]
		if z, ok := p.fitTouched(d, u.node, m); ok {
			if c := (candidate{node: u.node, zone: z, score: u.members}); p.better(c, best) {
				best = c
			}
		}
	}
	if best.node >= 0 {
		return best
	}
	if ni, z := p.untouched(d, m); ni >= 0 {
		return candidate{node: ni, zone: z}
	}
	return noCandidate
}

func (p *planner) place(c candidate, m *Member, member bool) Placement {
	u := p.touch(c.node)
	u.res.Add(&m.Request)
	u.ports = append(u.ports, m.HostPorts...)
	numa := -1
	if c.zone >= 0 {
		u.zoneCPUs[c.zone] += m.PinnedCPUs
		u.zoneMem[c.zone] += m.PinnedMemory
		u.pinned += m.PinnedCPUs
		numa = p.s.ZonesOf(int(c.node))[c.zone].NUMA
	}
	if member {
		p.addMember(c.node, m.Group)
	}
	return Placement{Node: p.s.Nodes[c.node].Name, NUMA: numa}
}

func (p *planner) run() (*Result, error) {
	g := p.g
	need := g.MinAvailable
	if need == 0 {
		need = len(g.Members)
	}
	res := &Result{}
	order := make([]int, 0, len(g.Members))
	for i := range g.Members {
		m := &g.Members[i]
		if m.BoundNode == "" {
			order = append(order, i)
			continue
		}
		if ni, ok := p.s.NodeIndex(m.BoundNode); ok {
			p.addMember(int32(ni), m.Group)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(g.Members[a].Group, g.Members[b].Group) })
	var failed *FitError
	for _, i := range order {
		m := &g.Members[i]
		c := p.chooseWorker(m)
		if c.node < 0 {
			res.Unplaced = append(res.Unplaced, i)
			if failed == nil {
				failed = p.diagnose(m, true)
			}
			if len(g.Members)-len(res.Unplaced) < need {
				failed.Required, failed.Total = need, len(g.Members)
				return nil, failed
			}
			continue
		}
		pl := p.place(c, m, true)
		pl.Member = i
		res.Placements = append(res.Placements, pl)
	}
	if g.Launcher != nil {
		c := p.chooseLauncher(g.Launcher)
		if c.node < 0 {
			failed = p.diagnose(g.Launcher, false)
			failed.Required, failed.Total, failed.Launcher = need, len(g.Members), true
			return nil, failed
		}
		pl := p.place(c, g.Launcher, false)
		pl.Member = -1
		res.Launcher = &pl
	}
	for i := range p.uses {
		if p.uses[i].members > 0 {
			res.NodesUsed++
		}
	}
	return res, nil
}
