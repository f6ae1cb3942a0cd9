package hpcjob

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// JobPlan is a job expanded and placed on a snapshot.
type JobPlan struct {
	Choice  Choice
	Workers []Worker
	// Pods are the worker pods, index-aligned with Workers; Launcher is the launcher pod.
	Pods     []*corev1.Pod
	Launcher *corev1.Pod
	Gang     *plan.Gang
	Result   *plan.Result
	Hostfile string
	// Note explains a choice that differs from the plain policy (a network job split over
	// several workers, an elastic job below its maximum).
	Note string
}

// Options are the placer's settings that shape a job's plan.
type Options struct {
	// SchedulerName is the schedulerName the job's pods get.
	SchedulerName string
	// NoTaskGroups turns task-group scheduling off (the placer's --task-groups=false): the gang
	// is planned with plan.Gang.NoTaskGroups, every node scored alike. The job is still split
	// into task groups (Choice.Groups); only the placement ignores them.
	NoTaskGroups bool
}

// expansion builds the pods and gang of a job for its workers in groups task groups.
func expansion(job *v1alpha1.HPCJob, workers []Worker, groups int, opts Options) *JobPlan {
	jp := &JobPlan{Workers: workers}
	policy := plan.LeastLoaded
	if job.Spec.Placement == v1alpha1.MostLoaded {
		policy = plan.MostLoaded
	}
	g := &plan.Gang{
		Key:            snapshot.HPCJobKey(job.Namespace, job.Name),
		Groups:         groups,
		Policy:         policy,
		ExclusiveNodes: job.Spec.ExclusiveNodes,
		NoTaskGroups:   opts.NoTaskGroups,
	}
	workerC := plan.ConstraintsOf(&job.Spec.Worker.Spec)
	for _, w := range jp.Workers {
		pod := WorkerPod(job, w, opts.SchedulerName)
		jp.Pods = append(jp.Pods, pod)
		g.Members = append(g.Members, plan.MemberFromPod(pod, w.Group, workerC))
	}
	if m := job.Spec.Gang.MinAvailable; m != nil && job.Spec.Elastic == nil {
		g.MinAvailable = min(int(*m), len(g.Members))
	}
	jp.Launcher = LauncherPod(job, opts.SchedulerName)
	launcher := plan.MemberFromPod(jp.Launcher, 0, plan.ConstraintsOf(&jp.Launcher.Spec))
	g.Launcher = &launcher
	jp.Gang = g
	jp.Hostfile = Hostfile(job, jp.Workers)
	return jp
}

// AssignPorts gives the workers of a placed plan their sshd ports (AssignSSHPorts, on the nodes
// the plan chose) and rebuilds their pods and the hostfile with them.
func (jp *JobPlan) AssignPorts(job *v1alpha1.HPCJob, s *snapshot.Snapshot, r mpi.PortRange, scheduler string) error {
	if !OnHostNetwork(job) {
		return nil
	}
	nodes := make([]string, len(jp.Workers))
	if jp.Result != nil {
		for _, pl := range jp.Result.Placements {
			nodes[pl.Member] = pl.Node
		}
	}
	if err := AssignSSHPorts(job, s, r, jp.Workers, nodes); err != nil {
		return err
	}
	for i, w := range jp.Workers {
		jp.Pods[i] = WorkerPod(job, w, scheduler)
	}
	jp.Hostfile = Hostfile(job, jp.Workers)
	return nil
}

func (jp *JobPlan) place(s *snapshot.Snapshot) error {
	res, err := plan.Plan(s, jp.Gang)
	if err != nil {
		return err
	}
	jp.Result = res
	return nil
}

// PlanJob expands a validated job and plans it on a snapshot with the placer's options. It returns a *plan.FitError (possibly wrapped) when the job does not fit.
func PlanJob(s *snapshot.Snapshot, job *v1alpha1.HPCJob, opts Options) (*JobPlan, error) {
	spec := &job.Spec
	if spec.Elastic != nil {
		return planElastic(s, job, opts)
	}
	available := 0
	if spec.Granularity != v1alpha1.GranularityNone && spec.Profile != v1alpha1.ProfileNetwork {
		probe := expansion(job, Workers(job, []int{max(1, int(spec.SlotsPerWorker))}, 1), 1, opts)
		available = plan.Available(s, probe.Gang, &probe.Gang.Members[0])
		if available == 0 {
			probe.Gang.Launcher = nil
			_, err := plan.Plan(s, probe.Gang)
			what := "one task"
			if spec.SlotsPerWorker > 0 {
				what = fmt.Sprintf("one worker of slotsPerWorker %d tasks", spec.SlotsPerWorker)
			}
			return nil, fmt.Errorf("no node can take even %s: %w", what, err)
		}
	}
	c := Choose(spec, available)
	jp := expansion(job, Workers(job, SplitTasks(WorkerTasks(spec), c.Workers), c.Groups), c.Groups, opts)
	jp.Choice = c
	err := jp.place(s)
	if err == nil && spec.Granularity == v1alpha1.GranularityNone && jp.Result.NodesUsed > c.Nodes {
		jp.Note = fmt.Sprintf("granularity none asks for one node; the %d workers did not fit one and use %d", c.Workers, jp.Result.NodesUsed)
	}
	var fe *plan.FitError
	if err == nil || spec.Profile != v1alpha1.ProfileNetwork || spec.Granularity == v1alpha1.GranularityNone || spec.SlotsPerWorker > 0 || !errors.As(err, &fe) {
		return jp, err
	}
	if _, never := plan.Plan(s.Capacity(), jp.Gang); never == nil {
		// One worker would fit a NUMA node of an idle node: the job waits for one, like any gang.
		return jp, fmt.Errorf("%w; a network job keeps its tasks in one worker and waits for a NUMA node to hold them (it is split only when none ever could)", err)
	}
	return splitNetwork(s, job, opts, err)
}

// splitNetwork places a network job whose one worker could never fit a NUMA node of any node,
// however idle: it takes the fewest workers, each small enough for one NUMA node, that would
// fit the idle cluster as one task group — which packs them onto as few nodes as possible (MPI
// ranks on one node talk through shared memory) — and places that many now or not at all. The
// split depends on the cluster's shape, never on its load: a busy cluster makes the job wait,
// not spread.
func splitNetwork(s *snapshot.Snapshot, job *v1alpha1.HPCJob, opts Options, single error) (*JobPlan, error) {
	nt := int(job.Spec.Tasks)
	cpu := int(job.Spec.TaskResources.CPU.Value())
	idle := s.Capacity()
	hi := min(nt, v1alpha1.MaxWorkers)
	lo := 2
	if z := plan.LargestZone(idle); z > 0 {
		lo = max(lo, (nt*cpu+z-1)/z)
	}
	if lo > hi {
		return nil, single
	}
	fits := func(k int) error { return expansion(job, Workers(job, SplitTasks(nt, k), 1), 1, opts).place(idle) }
	if err := fits(hi); err != nil {
		return nil, fmt.Errorf("network job fits neither one worker (%w) nor %d workers, even on an idle cluster: %w", single, hi, err)
	}
	k := hi
	for lo < k {
		mid := lo + (k-lo)/2
		if fits(mid) == nil {
			k = mid
		} else {
			lo = mid + 1
		}
	}
	jp := expansion(job, Workers(job, SplitTasks(nt, k), 1), 1, opts)
	if err := jp.place(s); err != nil {
		return jp, fmt.Errorf("network job does not fit one NUMA node and waits to run as %d workers: %w", k, err)
	}
	jp.Choice = Choice{Nodes: jp.Result.NodesUsed, Workers: k, Groups: 1}
	jp.Note = fmt.Sprintf("network job does not fit one NUMA node: split into %d workers on %d nodes", k, jp.Result.NodesUsed)
	return jp, nil
}

// planElastic starts an elastic job with as many workers as fit, between minReplicas and
// maxReplicas: workers 0 to k-1 as ElasticWorker describes them.
func planElastic(s *snapshot.Snapshot, job *v1alpha1.HPCJob, opts Options) (*JobPlan, error) {
	e := job.Spec.Elastic
	try := func(k int) (*JobPlan, error) { return PlanElasticAt(s, job, k, opts) }
	lo, hi := int(e.MinReplicas), int(e.MaxReplicas)
	best, err := try(lo)
	if err != nil {
		return nil, fmt.Errorf("elastic job does not fit even at minReplicas %d: %w", lo, err)
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if jp, err := try(mid); err == nil {
			best, lo = jp, mid
		} else {
			hi = mid - 1
		}
	}
	if lo < int(e.MaxReplicas) {
		best.Note = fmt.Sprintf("elastic job started with %d of at most %d workers", lo, e.MaxReplicas)
	}
	return best, nil
}

// PlanElasticAt plans a validated elastic job started with exactly k workers (workers 0 to k-1
// as ElasticWorker describes them); the plan is returned with the error when it does not fit.
func PlanElasticAt(s *snapshot.Snapshot, job *v1alpha1.HPCJob, k int, opts Options) (*JobPlan, error) {
	groups, nodes := k, k
	if job.Spec.Profile == v1alpha1.ProfileNetwork {
		groups, nodes = 1, 1
	}
	workers := make([]Worker, k)
	for i := range workers {
		workers[i] = ElasticWorker(job, i)
	}
	jp := expansion(job, workers, groups, opts)
	jp.Choice = Choice{Nodes: nodes, Workers: k, Groups: groups}
	return jp, jp.place(s)
}
