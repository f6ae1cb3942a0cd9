package main

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
)

// processLister is what the /processes view needs of the agent.
type processLister interface {
	Processes(pods []types.NamespacedName) ([]agent.PinnedProcesses, error)
}

// processesView lists the processes of the pinned containers of the given pods as the
// /processes view.
func processesView(node string, a processLister, pods []types.NamespacedName) (inspect.Processes, error) {
	list, err := a.Processes(pods)
	if err != nil {
		return inspect.Processes{}, err
	}
	v := inspect.Processes{
		Node: node, PerContainer: agent.MaxProcessesPerContainer, PerListing: agent.MaxProcessesPerListing,
		Containers: make([]inspect.ContainerProcesses, 0, len(list)),
	}
	for _, pp := range list {
		c := inspect.ContainerProcesses{
			Namespace: pp.Pin.Namespace, Pod: pp.Pin.Pod, PodUID: pp.Pin.PodUID, Container: pp.Pin.Container,
			ContainerID: pp.Container.String(), CPUs: pp.Pin.CPUs.String(), Mems: pp.Pin.Mems.String(),
			NUMANode: int(pp.Pin.NUMANode), Written: pp.Pin.Written, Listed: pp.Processes.Listed,
			Processes: make([]inspect.Process, 0, len(pp.Processes.Processes)),
		}
		if pp.Err != nil {
			c.Error = pp.Err.Error()
		}
		for _, p := range pp.Processes.Processes {
			ip := inspect.Process{PID: p.PID, Command: p.Command, Cgroup: p.Cgroup, CPUs: p.CPUs.String(), Mems: p.Mems.String(), Problem: p.Problem}
			if p.Rank.Known() {
				rank := p.Rank.Value
				ip.Rank, ip.RankVariable = &rank, p.Rank.Variable
			}
			c.Processes = append(c.Processes, ip)
		}
		v.Containers = append(v.Containers, c)
	}
	return v, nil
}
