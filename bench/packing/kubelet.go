package main

import (
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/kubelet"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// kubeletPacker is the kubelet's static CPU manager under the topology manager's
// single-numa-node policy (container scope, default options otherwise), as bench/internal/kubelet
// models it: the lowest NUMA node with room admits the request, and takeByTopologyNUMAPacked
// picks its CPUs inside that node. With full-pcpus-only a request must also be a multiple of the
// threads per core.
//
// Both packers share the pool rules of the comparison (same reserved CPUs, same shared minimum),
// so only the placement decisions differ.
type kubeletPacker struct {
	topo      *topology.Topology
	cm        *kubelet.CPUManager
	minShared int
	wholeOnly bool
	// free are the CPUs neither reserved nor held.
	free kubelet.Free
	held map[int][]int
}

func newKubeletPacker(topo *topology.Topology, reserved []int, minShared int, wholeOnly bool) *kubeletPacker {
	cm := kubelet.New(topo)
	return &kubeletPacker{topo: topo, cm: cm, minShared: minShared, wholeOnly: wholeOnly,
		free: cm.Free(topo.OnlineCPUs.Difference(cpuset.New(reserved...))), held: map[int][]int{}}
}

// admit places request id of n CPUs, reporting the CPUs or false when it is rejected.
func (k *kubeletPacker) admit(id, n int) ([]int, bool) {
	if (k.wholeOnly && n%k.topo.ThreadsPerCore() != 0) || k.free.Size()-n < k.minShared {
		return nil, false
	}
	node, ok := k.cm.SingleNUMANode(k.free, n)
	if !ok {
		return nil, false
	}
	cpus, _ := k.cm.TakePacked(k.free, n, node)
	k.held[id] = cpus
	return cpus, true
}

func (k *kubeletPacker) release(id int) {
	k.free.Release(k.held[id])
	delete(k.held, id)
}
