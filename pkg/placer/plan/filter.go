package plan

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// Constraints are the node constraints of a pod: what kube-scheduler's TaintToleration,
// NodeName-free NodeAffinity and node selector filters check.
type Constraints struct {
	Tolerations  []corev1.Toleration
	NodeSelector map[string]string
	// Required is the pod's requiredDuringSchedulingIgnoredDuringExecution node affinity.
	Required *corev1.NodeSelector
}

// ConstraintsOf extracts a pod spec's node constraints.
func ConstraintsOf(spec *corev1.PodSpec) *Constraints {
	c := &Constraints{Tolerations: spec.Tolerations, NodeSelector: spec.NodeSelector}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		c.Required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return c
}

// staticReason says why a node can never take a pod with these constraints, or nil when it
// might. It ignores resources.
func staticReason(n *snapshot.Node, c *Constraints) *reason {
	if t := untolerated(n, c); t != nil {
		return &reason{kind: KindTaint, detail: t.ToString()}
	}
	for k, v := range c.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return &reason{kind: KindSelector, detail: "nodeSelector " + k + "=" + v}
		}
	}
	if c.Required != nil && !matchesNodeSelector(n, c.Required) {
		return &reason{kind: KindSelector, detail: "required node affinity"}
	}
	return nil
}

// admits reports whether staticReason is nil, without building a reason (it runs for every node
// of every plan).
func admits(n *snapshot.Node, c *Constraints) bool {
	if untolerated(n, c) != nil {
		return false
	}
	for k, v := range c.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	return c.Required == nil || matchesNodeSelector(n, c.Required)
}

// untolerated returns the node's first NoSchedule or NoExecute taint the pod does not tolerate.
func untolerated(n *snapshot.Node, c *Constraints) *corev1.Taint {
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(c.Tolerations, t) {
			return t
		}
	}
	return nil
}

// exclusiveReason says why a gang may not use a node because of another HPC job there.
func exclusiveReason(n *snapshot.Node, g *Gang) *reason {
	for _, j := range n.Jobs {
		if j.Key != g.Key && (g.ExclusiveNodes || j.Exclusive) {
			return &reason{kind: KindExclusive, detail: j.Key}
		}
	}
	return nil
}

func tolerated(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(logr.Discard(), t, true) {
			return true
		}
	}
	return false
}

// matchesNodeSelector applies required node affinity: the terms are ORed, the requirements of a
// term ANDed; a term without requirements matches nothing.
func matchesNodeSelector(n *snapshot.Node, sel *corev1.NodeSelector) bool {
	for i := range sel.NodeSelectorTerms {
		term := &sel.NodeSelectorTerms[i]
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok := true
		for j := range term.MatchExpressions {
			r := &term.MatchExpressions[j]
			v, has := n.Labels[r.Key]
			if !matchRequirement(r, v, has) {
				ok = false
				break
			}
		}
		for j := 0; ok && j < len(term.MatchFields); j++ {
			r := &term.MatchFields[j]
			ok = r.Key == "metadata.name" && matchRequirement(r, n.Name, true)
		}
		if ok {
			return true
		}
	}
	return false
}

func matchRequirement(r *corev1.NodeSelectorRequirement, v string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}

// Kind is a category of reasons a node rejects a pod; FitError.Kind names the dominant one
// (metrics label gang failures by it).
type Kind string

// Reason kinds.
const (
	KindTaint     Kind = "taint"
	KindSelector  Kind = "selector"
	KindExclusive Kind = "exclusive"
	KindTopology  Kind = "no-topology"
	KindCPU       Kind = "cpu"
	KindMemory    Kind = "memory"
	KindStorage   Kind = "ephemeral-storage"
	KindPods      Kind = "pods"
	KindExtended  Kind = "extended-resource"
	KindNUMA      Kind = "numa"
	KindPorts     Kind = "host-port"
	KindNoNodes   Kind = "no-nodes"
)

// reason is why one node rejects one member.
type reason struct {
	kind   Kind
	detail string
	// largest is, for KindNUMA, the most free CPUs of any NUMA node of the node.
	largest int
}

func (r *reason) text() string {
	switch r.kind {
	case KindTaint:
		return "untolerated taint " + r.detail
	case KindSelector:
		return "do not match the " + r.detail
	case KindExclusive:
		return "run " + r.detail + " (exclusive nodes)"
	case KindTopology:
		return "cannot take pinned workers: " + r.detail
	case KindNUMA:
		return "have no NUMA node with " + r.detail
	case KindPods:
		return "have no room for another pod"
	case KindPorts:
		return "have host port " + r.detail + " in use"
	default:
		return fmt.Sprintf("have insufficient %s", r.detail)
	}
}
