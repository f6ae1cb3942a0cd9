package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FitError says why a gang does not fit: the first member (or the launcher) that fits no node,
// and for how many nodes each reason applies.
type FitError struct {
	Gang string
	// Member is the pod that fits nowhere; Launcher is true when it is the gang's launcher.
	Member   string
	Launcher bool
	// Demand describes what the member asks for.
	Demand string
	// Required is how many members had to fit, of Total.
	Required, Total int
	// Nodes is the number of nodes in the snapshot.
	Nodes int
	// Reasons are sorted by how many nodes they apply to, most first.
	Reasons []NodeReason
}

// NodeReason is one reason and the number of nodes it rules out.
type NodeReason struct {
	Kind  Kind
	Text  string
	Nodes int
}

// Kind is the dominant reason category (for metrics): the one ruling out the most nodes.
func (e *FitError) Kind() Kind {
	if len(e.Reasons) == 0 {
		return KindNoNodes
	}
	return e.Reasons[0].Kind
}

func (e *FitError) Error() string {
	var b strings.Builder
	role := "member"
	if e.Launcher {
		role = "launcher"
	}
	fmt.Fprintf(&b, "%s: %s %s (%s) fits none of %d nodes", e.Gang, role, e.Member, e.Demand, e.Nodes)
	for i, r := range e.Reasons {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%d %s", sep, r.Nodes, r.Text)
	}
	if e.Launcher {
		fmt.Fprintf(&b, "; the %d members fit but the gang needs its launcher too", e.Total)
	} else if e.Required < e.Total {
		fmt.Fprintf(&b, "; fewer than minAvailable %d of %d members fit", e.Required, e.Total)
	} else {
		fmt.Fprintf(&b, "; all %d members must fit together", e.Total)
	}
	if h := hint(e.Kind()); h != "" {
		b.WriteString("; ")
		b.WriteString(h)
	}
	return b.String()
}

func hint(k Kind) string {
	switch k {
	case KindNoNodes:
		return "the cluster has no nodes"
	case KindNUMA:
		return "a worker needs all its CPUs in one NUMA node: use more, smaller workers (granularity: granularity) or wait for cores to free up"
	case KindTopology:
		return "deploy the finegrain node agent so that nodes publish their free-core maps"
	case KindTaint:
		return "add a toleration to the pod template if it may run there"
	case KindSelector:
		return "check the pod template's nodeSelector and node affinity against the node labels"
	case KindExclusive:
		return "those nodes are held for other HPC jobs: wait for them, or drop exclusiveNodes"
	case KindPorts:
		return "another pod on those nodes holds the port: wait for it to end, or use another port"
	default:
		return "wait for resources to free up or ask for less"
	}
}

// diagnose explains why m fits no node in the plan's current state.
func (p *planner) diagnose(m *Member, worker bool) *FitError {
	type bucket struct {
		r     reason
		nodes int
	}
	buckets := map[string]*bucket{}
	for ni := range p.s.Nodes {
		n := &p.s.Nodes[ni]
		r := staticReason(n, m.Constraints)
		if r == nil && worker {
			r = exclusiveReason(n, p.g)
		}
		if r == nil {
			r = p.fitReason(int32(ni), m)
		}
		if r == nil {
			continue
		}
		key := string(r.kind) + "\x00" + r.detail
		b, ok := buckets[key]
		if !ok {
			b = &bucket{r: *r}
			buckets[key] = b
		}
		b.nodes++
		b.r.largest = max(b.r.largest, r.largest)
	}
	e := &FitError{Gang: p.g.Key, Member: m.Name, Demand: describe(m), Nodes: len(p.s.Nodes)}
	for _, b := range buckets {
		text := b.r.text()
		if b.r.kind == KindNUMA {
			text += " (the largest has " + strconv.Itoa(b.r.largest) + ")"
		}
		e.Reasons = append(e.Reasons, NodeReason{Kind: b.r.kind, Text: text, Nodes: b.nodes})
	}
	slices.SortFunc(e.Reasons, func(a, b NodeReason) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), cmp.Compare(a.Text, b.Text))
	})
	return e
}

// describe says what a member asks for, e.g. "4 CPUs in one NUMA node, 4 CPU and 8Gi memory".
func describe(m *Member) string {
	var parts []string
	if m.PinnedCPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d exclusive %s in one NUMA node", m.PinnedCPUs, plural(m.PinnedCPUs, "CPU")))
	}
	r := &m.Request
	parts = append(parts, fmt.Sprintf("requests cpu %s, memory %s", formatMilli(r.MilliCPU), formatBytes(r.Memory)))
	for _, s := range r.Scalars {
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, s.Value))
	}
	return strings.Join(parts, ", ")
}

func formatMilli(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
