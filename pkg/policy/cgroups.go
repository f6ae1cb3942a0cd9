package policy

import (
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// CgroupCPUs is what one container's cgroup carries: its cpuset.cpus and cpuset.mems.
type CgroupCPUs struct {
	CPUs, Mems cpuset.CPUSet
}

// PinnedCgroups tells, from the cgroups of a node's containers alone (no checkpoint, no pod
// list), which of them carry an exclusive pin: CPUs of one NUMA node, with that node as their
// memory nodes, that no other of the cgroups carries. The agent writes the shared pool to every
// other container and to each pod's sandbox, so the shared pool is carried by many cgroups and
// never taken for a pin, while a pin it wrote is carried by its container alone. A cgroup the
// kubelet made and nobody pinned carries every CPU, shared with the others. The answer is a hint
// for Reconcile, which still checks each pin against the topology, the reserved CPUs and the
// shared pool's minimum before it keeps it.
func PinnedCgroups(topo *topology.Topology, cgs []CgroupCPUs) []bool {
	holders := map[int]int{}
	for _, cg := range cgs {
		for _, cpu := range cg.CPUs.UnsortedList() {
			holders[cpu]++
		}
	}
	out := make([]bool, len(cgs))
	for i, cg := range cgs {
		if cg.CPUs.IsEmpty() {
			continue
		}
		cpus := cg.CPUs.List()
		node := topo.NUMANodeOfCPU(cpus[0])
		pinned := node != topology.NoNUMA && cg.Mems.Equals(cpuset.New(int(node)))
		for _, cpu := range cpus {
			if !pinned {
				break
			}
			pinned = holders[cpu] == 1 && topo.NUMANodeOfCPU(cpu) == node
		}
		out[i] = pinned
	}
	return out
}
