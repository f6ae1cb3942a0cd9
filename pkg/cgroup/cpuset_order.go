package cgroup

import (
	"k8s.io/utils/cpuset"
)

// cgroup v1 keeps every cpuset a subset of its parent's at all times: a write that would make a
// child exceed its parent fails with EACCES, and a parent cannot shrink below a child (EBUSY).
// cgroup v2 has no such rule (a child's effective set is the intersection), so this ordering is
// for v1 only.

// cpusetNode is one cgroup of a v1 cpuset tree being rewritten: the container's ancestors
// (kubepods down to the pod), the container, and the container's own sub-cgroups.
type cpusetNode struct {
	dir string
	// parent indexes the node's parent in the slice, -1 for the topmost node.
	parent int
	cur    cpuset.CPUSet
	want   cpuset.CPUSet
}

// v1CpusetWants fills in the wanted sets of a tree in pre-order whose first len(ancestors)
// nodes are the container's ancestors, followed by the container, followed by its descendants.
// Ancestors only widen to hold the target; the container gets the target; a descendant that
// mirrored its parent keeps mirroring it, and one that was narrower keeps what it can of its own
// set (all of the parent's new set if nothing is left).
func v1CpusetWants(nodes []cpusetNode, container int, target cpuset.CPUSet) {
	for i := range nodes {
		n := &nodes[i]
		switch {
		case i < container:
			n.want = n.cur.Union(target)
		case i == container:
			n.want = target
		default:
			p := nodes[n.parent]
			n.want = n.cur.Intersection(p.want)
			if n.cur.Equals(p.cur) || n.want.IsEmpty() {
				n.want = p.want
			}
		}
	}
}

// orderV1CpusetWrites returns the writes that move every node from cur to want without ever
// breaking the subset rule, for one file (cpuset.cpus or cpuset.mems). nodes must be in
// pre-order (every parent before its children) with each want a subset of its parent's want.
//
// Top-down, each node first takes want ∪ (its children's current sets): that widens it enough
// for its children's own widening and never cuts below a child. Bottom-up, each node that still
// holds extra CPUs narrows to want, after its children have. A container without sub-cgroups
// therefore gets exactly one write.
func orderV1CpusetWrites(nodes []cpusetNode, file string) []Write {
	step := make([]cpuset.CPUSet, len(nodes))
	for i, n := range nodes {
		step[i] = n.want
		for _, c := range nodes[i+1:] {
			if c.parent == i {
				step[i] = step[i].Union(c.cur)
			}
		}
	}
	var writes []Write
	for i, n := range nodes {
		if !step[i].Equals(n.cur) {
			writes = append(writes, Write{Dir: n.dir, File: file, Old: n.cur.String(), New: step[i].String()})
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		if n := nodes[i]; !step[i].Equals(n.want) {
			writes = append(writes, Write{Dir: n.dir, File: file, Old: step[i].String(), New: n.want.String()})
		}
	}
	return writes
}
