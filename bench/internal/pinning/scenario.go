// Package pinning measures what finegrain's pinning buys on the machine it runs on: EP-DGEMM
// and EP-STREAM ranks (fgworker) alone, next to a noisy neighbour with everything floating, and
// pinned by finegrain's allocator (pkg/policy) and cgroup writer (pkg/cgroup) into real cgroups
// of a kubelet-shaped tree it creates for the purpose, coarse- and fine-grained, and as a
// kubelet with the static CPU manager policy would pin them. It repeats every scenario, and
// reports medians, spread and ratios to the baseline as a markdown table, JSON rows and PNG bar
// plots. It creates and removes only its own cgroups below a per-run base directory.
package pinning

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Scenario names, as the JSON rows spell them.
const (
	Alone         = "alone"
	Unmanaged     = "unmanaged"
	Exclusive     = "exclusive"
	Coarse        = "coarse"
	Fine          = "fine"
	KubeletStatic = "kubelet-static"
)

// AllScenarios in the order they are run and reported.
var AllScenarios = []string{Alone, Unmanaged, Exclusive, Coarse, Fine, KubeletStatic}

// layout is where one scenario puts its ranks and its neighbour.
type layout struct {
	// noise: whether the neighbour runs.
	noise bool
	// groups are the CPU sets of the rank cgroups, with the ranks each holds; none: the ranks
	// float in the bench's own cgroup.
	groups []group
	// mems is cpuset.mems of the rank cgroups; empty leaves the parent's (all nodes).
	mems cpuset.CPUSet
	// shared is the neighbour's cpuset; empty: it floats (still in its own cgroup for the quota).
	shared cpuset.CPUSet
}

// ranksCPUs is the union of the rank cgroups' cpusets.
func (l layout) ranksCPUs() cpuset.CPUSet {
	all := cpuset.New()
	for _, g := range l.groups {
		all = all.Union(g.cpus)
	}
	return all
}

type group struct {
	cpus  cpuset.CPUSet
	ranks []int
}

// plan decides the layout of scenario name for ranks ranks on topo: finegrain's allocator for
// exclusive, coarse and fine, which gives every rank a whole core (its SMT siblings stay idle,
// as HPC runs them); the kubelet static policy's choice for kubelet-static.
func plan(name string, topo *topology.Topology, ranks int) (layout, error) {
	all := make([]int, ranks)
	for i := range all {
		all[i] = i
	}
	switch name {
	case Alone:
		return layout{}, nil
	case Unmanaged:
		return layout{noise: true}, nil
	case Exclusive, Fine, Coarse:
		a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
		if err != nil {
			return layout{}, err
		}
		l := layout{noise: true}
		requests := [][]int{all}
		if name != Coarse {
			requests = nil
			for _, r := range all {
				requests = append(requests, []int{r})
			}
		}
		for i, rs := range requests {
			req := policy.Request{Key: policy.Key{PodUID: fmt.Sprintf("bench-%d", i), Container: "worker"}, CPUs: len(rs) * topo.ThreadsPerCore()}
			asg, err := a.Allocate(req)
			if err != nil {
				return layout{}, fmt.Errorf("scenario %s: allocate %d CPUs for ranks %v: %w", name, req.CPUs, rs, err)
			}
			l.groups = append(l.groups, group{cpus: asg.CPUs, ranks: rs})
			l.mems = l.mems.Union(asg.Mems)
		}
		l.shared = a.SharedCPUs()
		return l, nil
	case KubeletStatic:
		return kubeletStatic(topo, all)
	}
	return layout{}, fmt.Errorf("unknown scenario %q: use one of %v", name, AllScenarios)
}

// kubeletStatic models the kubelet's static CPU manager policy with no topology manager: one
// CPU is reserved for system daemons (the policy needs at least one, and takes the lowest
// numbered), each rank's container (a request of 1 CPU) takes one CPU in socket, core, thread
// order alone — no NUMA node or L3 group is considered, SMT siblings may go to different ranks —
// and cpuset.mems is left at every node. The reserved CPU stays in the shared pool, as it does
// in the kubelet.
func kubeletStatic(topo *topology.Topology, ranks []int) (layout, error) {
	online := topo.OnlineCPUs.List()
	if len(online) < len(ranks)+1 {
		return layout{}, fmt.Errorf("scenario %s: %d ranks need %d CPUs besides the reserved one, the machine has %d online", KubeletStatic, len(ranks), len(ranks), len(online))
	}
	order := slices.Clone(online[1:])
	slices.SortStableFunc(order, func(a, b int) int {
		ca, _ := topo.CPU(a)
		cb, _ := topo.CPU(b)
		return cmp.Or(cmp.Compare(ca.Socket, cb.Socket), cmp.Compare(ca.Core, cb.Core))
	})
	l := layout{noise: true}
	taken := cpuset.New()
	for i, r := range ranks {
		cpu := cpuset.New(order[i])
		l.groups = append(l.groups, group{cpus: cpu, ranks: []int{r}})
		taken = taken.Union(cpu)
	}
	l.shared = topo.OnlineCPUs.Difference(taken)
	return l, nil
}
