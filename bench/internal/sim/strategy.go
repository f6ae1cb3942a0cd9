package sim

import (
	"fmt"
	"strings"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Deployment is how a strategy turns jobs into running containers.
type Deployment int

const (
	// Kube is default Kubernetes: kube-scheduler's least-allocated spread over node totals, the
	// kubelet's CPU manager policy none (every container floats over the whole node).
	Kube Deployment = iota
	// KubeStatic is kube-scheduler with the kubelet's static CPU manager and topology manager
	// none: exclusive cores, taken NUMA-packed, spanning NUMA nodes when one has no room.
	KubeStatic
	// KubeStaticBestEffort is KubeStatic under the topology manager's best-effort policy: a
	// container that fits one NUMA node gets its CPUs there (the lowest-numbered such node), one
	// that fits none is admitted and spans, as under KubeStatic. The fine-grained scheduling
	// paper's CM baseline.
	KubeStaticBestEffort
	// Finegrain is the placer (granularity, expansion, task groups, gang) and the node agent's
	// allocator (exclusive cores of one NUMA node).
	Finegrain
)

// Containers is how the Kubernetes strategies split a job into containers.
type Containers int

const (
	// UserWorkers is the job's own worker count (spec.workers; when unset, the fewest workers
	// that each fit one NUMA node, see userWorkers).
	UserWorkers Containers = iota
	// PerNode is one container on each of min(nodes, tasks) nodes.
	PerNode
)

// Strategy is one deployment strategy under comparison.
type Strategy struct {
	Name       string
	Deployment Deployment
	// Containers applies to Kube, KubeStatic and KubeStaticBestEffort.
	Containers Containers
	// Granularity, Placement and ExclusiveNodes override the trace's choices for Finegrain; empty
	// or nil keeps what each job asks for.
	Granularity    v1alpha1.Granularity
	Placement      v1alpha1.PlacementPolicy
	ExclusiveNodes *bool
	// NoTaskGroups runs the placer with --task-groups=false (Finegrain only).
	NoTaskGroups bool
}

// Names of the fixed strategies.
const (
	StrategyKube        = "k8s"
	StrategyKubePerNode = "k8s-per-node"
	StrategyKubeStatic  = "k8s-static"
	// StrategyKubeStaticBestEffort is KubeStaticBestEffort with the job's own worker count.
	StrategyKubeStaticBestEffort = "k8s-static-besteffort"
	StrategyFinegrain            = "finegrain"
)

// Strategies returns every strategy: the three Kubernetes ones, finegrain with each job's own
// policies, finegrain-<granularity>-<least|most>[-exclusive] for every combination, then the
// static CPU manager under the topology manager's best-effort policy, then finegrain-scale-least
// and finegrain-granularity-least with task groups off (…-no-task-groups).
func Strategies() []Strategy {
	out := []Strategy{
		{Name: StrategyKube, Deployment: Kube, Containers: UserWorkers},
		{Name: StrategyKubePerNode, Deployment: Kube, Containers: PerNode},
		{Name: StrategyKubeStatic, Deployment: KubeStatic, Containers: UserWorkers},
		{Name: StrategyFinegrain, Deployment: Finegrain},
	}
	for _, g := range []v1alpha1.Granularity{v1alpha1.GranularityScale, v1alpha1.GranularityFine, v1alpha1.GranularityNone} {
		for _, p := range []v1alpha1.PlacementPolicy{v1alpha1.LeastLoaded, v1alpha1.MostLoaded} {
			for _, excl := range []bool{false, true} {
				name := fmt.Sprintf("finegrain-%s-%s", g, strings.TrimSuffix(string(p), "-loaded"))
				if excl {
					name += "-exclusive"
				}
				out = append(out, Strategy{Name: name, Deployment: Finegrain, Granularity: g, Placement: p, ExclusiveNodes: &excl})
			}
		}
	}
	shared := false
	return append(out, Strategy{Name: StrategyKubeStaticBestEffort, Deployment: KubeStaticBestEffort, Containers: UserWorkers},
		Strategy{Name: StrategyScaleNoTaskGroups, Deployment: Finegrain, Granularity: v1alpha1.GranularityScale, Placement: v1alpha1.LeastLoaded, ExclusiveNodes: &shared, NoTaskGroups: true},
		Strategy{Name: StrategyGranularityNoTaskGroups, Deployment: Finegrain, Granularity: v1alpha1.GranularityFine, Placement: v1alpha1.LeastLoaded, ExclusiveNodes: &shared, NoTaskGroups: true})
}

// SelectStrategies returns the named strategies in the order given; "all" (or no names) is every
// strategy.
func SelectStrategies(names []string) ([]Strategy, error) {
	all := Strategies()
	if len(names) == 0 || (len(names) == 1 && names[0] == "all") {
		return all, nil
	}
	var out []Strategy
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if seen[n] {
			return nil, fmt.Errorf("strategy %q named twice", n)
		}
		seen[n] = true
		found := false
		for _, s := range all {
			if s.Name == n {
				out = append(out, s)
				found = true
				break
			}
		}
		if !found {
			known := make([]string, len(all))
			for i, s := range all {
				known[i] = s.Name
			}
			return nil, fmt.Errorf("unknown strategy %q; known: all, %s", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// userWorkers is the worker count a user gives a job: spec.workers, or when unset the fewest
// workers of at most numaCPUs CPUs each (so that each fits one NUMA node of the machine).
func userWorkers(j *Job, numaCPUs int) int {
	if j.Spec.Workers > 0 {
		return int(j.Spec.Workers)
	}
	per := max(numaCPUs/int(j.Spec.TaskResources.CPU.Value()), 1)
	return min((int(j.Spec.Tasks)+per-1)/per, int(j.Spec.Tasks))
}

// spec returns a job's spec as the strategy runs it; numaCPUs is the machine's largest NUMA node.
func (s *Strategy) spec(j *Job, numaCPUs int) v1alpha1.HPCJobSpec {
	spec := j.Spec
	spec.Workers = int32(userWorkers(j, numaCPUs))
	if s.Granularity != "" {
		spec.Granularity = s.Granularity
	}
	if s.Placement != "" {
		spec.Placement = s.Placement
	}
	if s.ExclusiveNodes != nil {
		spec.ExclusiveNodes = *s.ExclusiveNodes
	}
	return spec
}
