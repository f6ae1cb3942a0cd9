package sim

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// workerContainer is the container name the simulated worker pods pin.
const workerContainer = "main"

// finegrain deploys jobs through the placer's code onto simulated node agents.
type finegrain struct {
	strategy Strategy
	topo     *topology.Topology
	maxNUMA  int
	nodes    []agentNode
	byName   map[string]int
	// pods are the bound pods by UID; podEvents the bindings and deletions the placer's cache
	// has not been told of yet, in order.
	pods      map[types.UID]*corev1.Pod
	podEvents []podEvent
	// jobs caches each job's HPCJob as the strategy runs it, by job index.
	jobs []*v1alpha1.HPCJob
	// held are each running job's pods, by job index.
	held [][]*corev1.Pod
	// allocatable is a node's allocatable CPUs; pinned counts the CPUs its workers hold.
	allocatable int
	pinned      []int
	// jobsOn and exclusiveOn count per node the running jobs with workers there, and those of
	// them that want their nodes to themselves.
	jobsOn, exclusiveOn []int
	// cache is the placer's view of the cluster, which the simulator feeds as informers do.
	// snap is its snapshot, taken at snapAt; dirty says the cluster changed since; ttl is how
	// long a snapshot serves before a change makes it taken again; version counts the
	// snapshot's changes (updates and reservations).
	cache   *snapshot.Cache
	snap    *snapshot.Snapshot
	snapAt  time.Duration
	dirty   bool
	ttl     time.Duration
	version uint64
}

// hpcJob returns job r's HPCJob under the strategy, built and validated once.
func (f *finegrain) hpcJob(r *run) (*v1alpha1.HPCJob, error) {
	if j := f.jobs[r.index]; j != nil {
		return j, nil
	}
	j := r.job.HPCJob()
	spec := f.strategy.spec(r.job, f.maxNUMA)
	spec.Launcher, spec.Worker = j.Spec.Launcher, j.Spec.Worker
	j.Spec = spec
	j.UID = types.UID("uid-job-" + r.job.Name)
	if errs := v1alpha1.Validate(j); len(errs) > 0 {
		return nil, fmt.Errorf("under strategy %s: %w", f.strategy.Name, errs.ToAggregate())
	}
	f.jobs[r.index] = j
	return j, nil
}

// tasksOf reads the MPI tasks the placer gave a worker pod.
func tasksOf(pod *corev1.Pod) (int, error) {
	n, err := strconv.Atoi(pod.Annotations[v1alpha1.AnnotationTasks])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("worker %s: annotation %s=%q is not a task count", pod.Name, v1alpha1.AnnotationTasks, pod.Annotations[v1alpha1.AnnotationTasks])
	}
	return n, nil
}

// unfit reports a job the strategy's overrides make invalid.
func (f *finegrain) unfit(r *run) string {
	if _, err := f.hpcJob(r); err != nil {
		return err.Error()
	}
	return ""
}

// freeCPUs bounds the CPUs job r could get: the allocatable CPUs no worker holds, on the nodes
// the exclusive-nodes filter leaves it (none of another job's workers when r wants its nodes to
// itself; none of a job that wants its nodes to itself otherwise).
func (f *finegrain) freeCPUs(r *run) int {
	job, _ := f.hpcJob(r)
	exclusive := job != nil && job.Spec.ExclusiveNodes
	free := 0
	for i := range f.nodes {
		if f.jobsOn[i] > 0 && (exclusive || f.exclusiveOn[i] > 0) {
			continue
		}
		free += f.allocatable - f.pinned[i]
	}
	return free
}

// place plans job r with hpcjob.PlanJob on the snapshot, as the controller does, then binds its
// pods and pins every worker through its node's allocator with the NUMA node the placer chose.
// A plan that does not fit returns the placer's reason. When an allocator refuses the placer's
// choice (the free-core maps promised more than the agent gives), the attempt is undone and
// marked refused: the real controller would have bound a worker the agent cannot pin.
func (f *finegrain) place(r *run) (attempt, error) {
	s := f.snap
	job, err := f.hpcJob(r)
	if err != nil {
		return attempt{}, err
	}
	jp, err := hpcjob.PlanJob(s, job, hpcjob.Options{SchedulerName: v1alpha1.DefaultSchedulerName, NoTaskGroups: f.strategy.NoTaskGroups})
	if err != nil {
		if fe := (*plan.FitError)(nil); errors.As(err, &fe) {
			return attempt{reason: err.Error()}, nil
		}
		return attempt{}, fmt.Errorf("plan job %s: %w", r.job.Name, err)
	}
	if len(jp.Result.Unplaced) > 0 || jp.Result.Launcher == nil {
		return attempt{}, fmt.Errorf("plan job %s: %d workers left unplaced or no launcher node; the simulator binds whole gangs only", r.job.Name, len(jp.Result.Unplaced))
	}
	var placed []Placed
	var held []*corev1.Pod
	for _, pl := range jp.Result.Placements {
		pod := jp.Pods[pl.Member]
		ni, ok := f.byName[pl.Node]
		if !ok {
			return attempt{}, fmt.Errorf("plan job %s: worker %s on unknown node %q", r.job.Name, pod.Name, pl.Node)
		}
		tasks, err := tasksOf(pod)
		if err != nil {
			return attempt{}, fmt.Errorf("job %s: %w", r.job.Name, err)
		}
		f.bind(pod, pl.Node)
		pod.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(pl.NUMA)
		held = append(held, pod)
		cpus, _ := snapshot.PinnedDemand(pod)
		asg, err := f.nodes[ni].alloc.Allocate(policy.Request{
			Key: policy.Key{PodUID: string(pod.UID), Container: workerContainer}, CPUs: cpus, NUMANode: policy.OnNUMANode(topology.NUMAID(pl.NUMA)),
		})
		if err != nil {
			f.held[r.index] = held
			if rerr := f.release(r); rerr != nil {
				return attempt{}, rerr
			}
			return attempt{refused: true, reason: fmt.Sprintf("the placer put worker %s (%d CPUs) on %s NUMA node %d, but the node's allocator refuses it: %v",
				pod.Name, cpus, pl.Node, pl.NUMA, err)}, nil
		}
		f.changed(ni)
		f.pinned[ni] += cpus
		perNUMA := make([]int, len(f.topo.NUMANodes))
		perNUMA[f.topo.NUMANodeIndex(asg.NUMANode)] = asg.CPUs.Size()
		placed = append(placed, Placed{Node: ni, Tasks: tasks, Threads: cpus, CPUs: perNUMA})
	}
	// The placer vouches for the workers it bound, as its job's status placements do.
	rec := snapshot.JobRecord{UID: job.UID, Exclusive: job.Spec.ExclusiveNodes, Workers: map[string]string{}}
	for _, pod := range held {
		rec.Workers[pod.Name] = pod.Spec.NodeName
	}
	f.cache.SetJob(Namespace, job.Name, rec)
	launcher := jp.Launcher
	f.bind(launcher, jp.Result.Launcher.Node)
	f.changed(f.byName[launcher.Spec.NodeName])
	held = append(held, launcher)
	f.held[r.index] = held
	for _, pod := range held {
		if err := s.Reserve(pod); err != nil {
			return attempt{}, fmt.Errorf("job %s: %w", r.job.Name, err)
		}
	}
	f.version++
	f.countJobs(r, job.Spec.ExclusiveNodes, 1)
	return attempt{workers: placed}, nil
}

// countJobs adds d to the job counts of the nodes job r's workers run on.
func (f *finegrain) countJobs(r *run, exclusive bool, d int) {
	seen := map[int]bool{}
	for _, pod := range f.held[r.index] {
		ni := f.byName[pod.Spec.NodeName]
		if pod.Labels[v1alpha1.LabelRole] != v1alpha1.RoleWorker || seen[ni] {
			continue
		}
		seen[ni] = true
		f.jobsOn[ni] += d
		if exclusive {
			f.exclusiveOn[ni] += d
		}
	}
}

// bind records a pod as bound and running on node.
func (f *finegrain) bind(pod *corev1.Pod, node string) {
	pod.Spec.NodeName = node
	pod.UID = types.UID("uid-" + pod.Name)
	pod.Status.Phase = corev1.PodRunning
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	f.pods[pod.UID] = pod
	f.podEvents = append(f.podEvents, podEvent{pod: pod})
}

// podEvent is a pod bound, or deleted, as the placer's pod informer would report it.
type podEvent struct {
	pod     *corev1.Pod
	deleted bool
}

// release ends job r (or undoes a refused placement, whose last worker holds no CPUs): its pods
// are deleted and its workers' CPUs go back to the shared pool.
func (f *finegrain) release(r *run) error {
	if r.state == running {
		f.countJobs(r, f.jobs[r.index].Spec.ExclusiveNodes, -1)
	}
	held := f.held[r.index]
	for i, pod := range held {
		ni := f.byName[pod.Spec.NodeName]
		if pod.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker {
			asg, ok := f.nodes[ni].alloc.Release(policy.Key{PodUID: string(pod.UID), Container: workerContainer})
			if !ok && (i < len(held)-1 || r.state == running) {
				return fmt.Errorf("job %s: worker %s holds no CPUs on %s", r.job.Name, pod.Name, pod.Spec.NodeName)
			}
			f.pinned[ni] -= asg.CPUs.Size()
		}
		delete(f.pods, pod.UID)
		f.podEvents = append(f.podEvents, podEvent{pod: pod, deleted: true})
		f.changed(ni)
	}
	f.held[r.index] = nil
	f.cache.DeleteJob(Namespace, r.job.Name)
	return nil
}
