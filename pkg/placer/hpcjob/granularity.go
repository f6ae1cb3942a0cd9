// Package hpcjob owns turning an HPCJob into pods and a plan: granularity selection (paper
// Algorithm 1), MPI-aware expansion (Algorithm 2: tasks split round-robin over workers, per-worker
// resources, the hostfile, the launcher, the headless Service), task groups (Algorithm 3), and
// planning the resulting gang on a snapshot, with the network split and elastic sizing around
// it. It builds objects and returns them; it must not call the API server or bind pods.
package hpcjob

import (
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Choice is what granularity selection decides: Nn nodes, Nw workers, Ng task groups.
type Choice struct {
	Nodes, Workers, Groups int
}

// Choose is paper Algorithm 1 for a validated, non-elastic spec, given the number of nodes that
// can take at least one task of the job:
//   - granularity none: Nn=1, Nw=workers, Ng=1 (the user's own worker count);
//   - network profile: Nn=1, Nw=1, Ng=1 (one worker holding every task);
//   - cpu or memory with scale: Nn=min(available, Nt), Nw=Nn, Ng=Nn;
//   - cpu or memory with granularity: Nn=min(available, Nt), Nw=Nt, Ng=Nn;
//   - slotsPerWorker set, whatever the above: Nw=Nt/slotsPerWorker, one fewer when the launcher
//     runs as a worker (chooseSlots), available
//     counting the nodes that can take one such worker.
//
// Worker counts are capped at v1alpha1.MaxWorkers. With no available node, scale and
// granularity choose zero nodes and workers.
func Choose(spec *v1alpha1.HPCJobSpec, available int) Choice {
	nt := int(spec.Tasks)
	if spec.SlotsPerWorker > 0 {
		return chooseSlots(spec, available)
	}
	switch {
	case spec.Granularity == v1alpha1.GranularityNone:
		return Choice{Nodes: 1, Workers: int(spec.Workers), Groups: 1}
	case spec.Profile == v1alpha1.ProfileNetwork:
		return Choice{Nodes: 1, Workers: 1, Groups: 1}
	case spec.Granularity == v1alpha1.GranularityFine:
		nn := min(available, nt)
		if nn == 0 {
			return Choice{}
		}
		return Choice{Nodes: nn, Workers: min(nt, v1alpha1.MaxWorkers), Groups: nn}
	default:
		nn := min(available, nt, v1alpha1.MaxWorkers)
		return Choice{Nodes: nn, Workers: nn, Groups: nn}
	}
}

// chooseSlots is Choose for a spec whose slotsPerWorker fixes Nw (v1alpha1.SlotWorkers): granularity
// none and the network profile keep them in one task group on one node, cpu and memory spread
// them as scale does, over Nn = min(available, Nw) nodes in Nn groups.
func chooseSlots(spec *v1alpha1.HPCJobSpec, available int) Choice {
	nw := v1alpha1.SlotWorkers(spec)
	if spec.Granularity == v1alpha1.GranularityNone || spec.Profile == v1alpha1.ProfileNetwork {
		return Choice{Nodes: 1, Workers: nw, Groups: 1}
	}
	nn := min(available, nw)
	if nn == 0 {
		return Choice{}
	}
	return Choice{Nodes: nn, Workers: nw, Groups: nn}
}

// SplitTasks deals tasks round-robin over workers: 16 over 3 gives 6, 5, 5.
func SplitTasks(tasks, workers int) []int {
	if workers < 1 {
		return nil
	}
	out := make([]int, workers)
	for i := range out {
		out[i] = tasks / workers
		if i < tasks%workers {
			out[i]++
		}
	}
	return out
}
