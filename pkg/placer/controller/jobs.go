package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// ConditionFinished is True once the launcher has ended.
const ConditionFinished = "Finished"

const expandPrefix = "expand "

func splitKey(key string) (ns, name string) {
	ns, name, _ = strings.Cut(key, "/")
	return ns, name
}

// jobKeys returns the queue keys of a job: its gang and its expansion.
func jobKeys(ns, name string) (gang, expand string) {
	gang = snapshot.HPCJobKey(ns, name)
	return gang, expandPrefix + gang
}

func (c *Controller) jobObject(ns, name string) (*unstructured.Unstructured, bool) {
	o, err := c.jobs.ByNamespace(ns).Get(name)
	if err != nil {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// jobPods lists the pods the placer made for a job, assumed ones included: those its job label
// names that the job object (by UID) controls. A pod with the label and another or no controller
// is foreign: never counted, changed or deleted as the job's (a user may label anything).
func (c *Controller) jobPods(ns, name string, uid types.UID, now time.Time) []*corev1.Pod {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelJob: name})
	pods, _ := c.pods.Pods(ns).List(sel)
	var out []*corev1.Pod
	for _, p := range c.assumed.overlay(pods, now) {
		if p.Namespace == ns && p.Labels[v1alpha1.LabelJob] == name && controlledBy(p, uid) {
			out = append(out, p)
		}
	}
	return out
}

// syncJob brings one job's queue entries and status in line with the cluster.
func (c *Controller) syncJob(ctx context.Context, key string) {
	ns, name := splitKey(key)
	gangKey, expandKey := jobKeys(ns, name)
	u, ok := c.jobObject(ns, name)
	if !ok {
		c.cache.DeleteJob(ns, name)
		c.queue.Remove(gangKey)
		c.queue.Remove(expandKey)
		c.queue.Remove(launcherKey(ns, name))
		if w, known := c.jobStatus[key]; known {
			c.forgetAdmission(w.uid)
		}
		delete(c.jobStatus, key)
		delete(c.timers, key)
		delete(c.launcherFailed, key)
		delete(c.lastReason, gangKey)
		delete(c.lastReason, gangKey+shrinkSuffix)
		delete(c.replans, key)
		return
	}
	job, err := decodeJob(u)
	st := c.statusOf(key, job)
	c.vouch(u, st)
	if err != nil {
		c.queue.Remove(gangKey)
		c.queue.Remove(expandKey)
		c.markInvalid(ctx, u, st, err)
		return
	}
	if c.suspended(ctx, u, job, st) {
		return
	}
	switch st.Phase {
	case "", v1alpha1.PhasePending:
		if st.Phase == "" {
			st.Phase = v1alpha1.PhasePending
			st.SubmitTime = ptrTime(u.GetCreationTimestamp())
			setCondition(st, ConditionValid, metav1.ConditionTrue, ReasonValid, "the spec is valid")
			setCondition(st, ConditionScheduled, metav1.ConditionFalse, ReasonUnschedulable, "waiting to be placed")
			c.writeStatus(ctx, u, st)
		}
		prio, err := c.priorityOf(job)
		if err != nil {
			c.queue.Remove(gangKey)
			c.waitForClass(ctx, u, st, err)
			return
		}
		if _, busy := c.inflight[gangKey]; !busy {
			c.queue.Add(gangKey, queue.Gang, prio, u.GetCreationTimestamp().Time,
				time.Duration(job.Spec.Gang.TimeoutSeconds)*time.Second)
		}
	case v1alpha1.PhaseRunning:
		c.syncRunning(ctx, u, job, st)
	default:
		c.queue.Remove(gangKey)
		c.queue.Remove(expandKey)
		c.queue.Remove(launcherKey(ns, name))
		c.cleanPods(ctx, job, time.Now())
		c.expireFinished(ctx, u, job, st, time.Now())
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// waitForClass reports a pending job that names a PriorityClass that does not exist: it is not
// queued until the class appears (a class event looks at every job again).
func (c *Controller) waitForClass(ctx context.Context, u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus, err error) {
	if setCondition(st, ConditionScheduled, metav1.ConditionFalse, ReasonPriorityClassNotFound, err.Error()) {
		c.writeStatus(ctx, u, st)
		c.event(u, true, ReasonPriorityClassNotFound, "%v", err)
	}
}

func (c *Controller) markInvalid(ctx context.Context, u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus, err error) {
	if st.Phase == v1alpha1.PhaseFailed && meta.IsStatusConditionFalse(st.Conditions, ConditionValid) {
		return
	}
	st.Phase = v1alpha1.PhaseFailed
	if st.SubmitTime == nil {
		st.SubmitTime = ptrTime(u.GetCreationTimestamp())
	}
	setCondition(st, ConditionValid, metav1.ConditionFalse, ReasonInvalidSpec, err.Error())
	c.writeStatus(ctx, u, st)
	c.event(u, true, ReasonInvalidSpec, "%v", err)
	c.metrics.GangFailures.WithLabelValues("invalid").Inc()
	c.log.Info("HPCJob invalid", "job", u.GetNamespace()+"/"+u.GetName(), "err", err)
}

// syncRunning follows a running job to its end: the active deadline, its workers (one lost ends
// the run), its launcher (created when the workers are ready, retried within the backoff limit);
// and it queues the job's expansion while it has workers left to place or room to grow.
func (c *Controller) syncRunning(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus) {
	ns, name := job.Namespace, job.Name
	key := ns + "/" + name
	gangKey, expandKey := jobKeys(ns, name)
	c.queue.Remove(gangKey)
	if c.inflight[gangKey] != nil {
		return
	}
	now := time.Now()
	if d := job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil && st.StartTime != nil {
		due := st.StartTime.Add(time.Duration(*d) * time.Second)
		if !now.Before(due) {
			c.finishJob(ctx, u, job, st, v1alpha1.PhaseFailed, ReasonDeadline,
				fmt.Sprintf("the job ran longer than runPolicy.activeDeadlineSeconds (%d s)", *d))
			return
		}
		c.wakeJobAt(key, due)
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range c.jobPods(ns, name, job.UID, now) {
		pods[p.Name] = p
	}
	rkey := rescaleKey(ns, name)
	if c.inflight[expandKey] == nil && c.inflight[rkey] == nil {
		if f := c.workerFailure(job, st, pods, now); f != nil {
			c.runFailed(ctx, u, job, st, *f)
			return
		}
	}
	if c.syncLauncher(ctx, u, job, st, pods, now) {
		return
	}
	if c.inflight[expandKey] != nil || c.inflight[rkey] != nil || c.interruptedRescale(ctx, u, job, st, now) {
		return
	}
	// A job without a rescale hook keeps the size it started with.
	grow := len(st.Placements) < int(st.Workers)
	if e := job.Spec.Elastic; e != nil && e.RescaleHook != nil && st.Workers < e.MaxReplicas {
		grow = true
	}
	if grow {
		prio, _ := c.priorityOf(job)
		c.queue.Add(expandKey, queue.Expansion, prio, st.StartTime.Time, 0)
	} else {
		c.queue.Remove(expandKey)
	}
}

// finishJob records the end of a job and cleans up its pods by runPolicy.cleanPodPolicy (by
// default the workers go and an ended launcher stays for its logs). It first asks the API server
// whether the job is still the one the informer shows: a job deleted and made again under its
// name must not be ended, nor lose its workers, on its predecessor's account (a status patch
// names the job only by name).
func (c *Controller) finishJob(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, phase v1alpha1.Phase, reason, msg string) {
	key := u.GetNamespace() + "/" + u.GetName()
	live, err := c.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && live.GetUID() != u.GetUID()):
		return
	case err != nil:
		c.log.Warn("read HPCJob before ending it failed; retrying", "job", key, "err", err)
		c.mu.Lock()
		c.dirtyJobs[key] = true
		c.mu.Unlock()
		return
	}
	delete(c.launcherFailed, key)
	now := metav1.Now()
	st.Phase = phase
	st.CompletionTime = &now
	setCondition(st, ConditionFinished, metav1.ConditionTrue, reason, msg)
	c.writeStatus(ctx, u, st)
	c.event(u, phase == v1alpha1.PhaseFailed, reason, "%s", msg)
	_, expandKey := jobKeys(u.GetNamespace(), u.GetName())
	c.queue.Remove(expandKey)
	c.queue.Remove(launcherKey(u.GetNamespace(), u.GetName()))
	c.cleanPods(ctx, job, now.Time)
	c.expireFinished(ctx, u, job, st, now.Time)
	c.log.Info("HPCJob finished", "job", key, "phase", phase, "reason", reason)
}

// attemptJob plans a pending job and, when it fits, starts binding it:
//  1. a job gone, unreadable or no longer pending leaves the queue;
//  2. pods of an interrupted attempt are removed first (clearInterrupted);
//  3. the job is planned on the snapshot and its sshd ports assigned; a job that does not fit
//     backs off (gangFailed);
//  4. the binding is described (jobBinding) and committed.
func (c *Controller) attemptJob(ctx context.Context, e *queue.Entry, now time.Time) {
	ns, name := splitKey(strings.TrimPrefix(e.Key, "HPCJob "))
	u, ok := c.jobObject(ns, name)
	if !ok {
		c.queue.Remove(e.Key)
		return
	}
	job, err := decodeJob(u)
	st := c.statusOf(ns+"/"+name, job)
	if err != nil || (st.Phase != "" && st.Phase != v1alpha1.PhasePending) {
		c.queue.Remove(e.Key)
		c.mu.Lock()
		c.dirtyJobs[ns+"/"+name] = true
		c.mu.Unlock()
		return
	}
	if c.clearInterrupted(ctx, e, job, now) {
		return
	}
	snap := c.snapshot(now)
	t0 := time.Now()
	jp, err := hpcjob.PlanJob(snap, job, c.planOptions())
	c.metrics.PlanDuration.Observe(time.Since(t0).Seconds())
	if err != nil {
		c.gangFailed(ctx, e, u, st, err, now, func(s *snapshot.Snapshot) error {
			_, err := hpcjob.PlanJob(s, job, c.planOptions())
			return err
		})
		return
	}
	if err := jp.AssignPorts(job, snap, c.opts.SSHPorts, c.opts.SchedulerName); err != nil {
		c.gangFailed(ctx, e, u, st, err, now, nil)
		return
	}
	names := make([]string, 0, len(jp.Pods)+1)
	for _, p := range jp.Pods {
		names = append(names, p.Name)
	}
	if job.Spec.LauncherCreationPolicy == v1alpha1.AtStartup {
		names = append(names, jp.Launcher.Name)
	}
	if err := c.nameTaken(job, names...); err != nil {
		c.gangFailed(ctx, e, u, st, err, now, nil)
		return
	}
	c.commit(ctx, snap, jobBinding(e, job, u, st, jp, now))
}

// nameTaken returns a *NotOwnedError for the first of the job's pod names that a pod the job does
// not control holds (a user's pod, or one of an earlier job of the same name still going away):
// the job cannot have that pod, and the placer leaves the other one alone.
func (c *Controller) nameTaken(job *v1alpha1.HPCJob, names ...string) error {
	for _, n := range names {
		if p, err := c.pods.Pods(job.Namespace).Get(n); err == nil && !controlledBy(p, job.UID) {
			return notOwned("Pod", p, job)
		}
	}
	return nil
}

// blocked backs off a running job's expansion or launcher that cannot go ahead (err says why: a
// name held by a pod the job does not own) and tells the job once per reason.
func (c *Controller) blocked(u *unstructured.Unstructured, e *queue.Entry, err error, now time.Time) {
	c.queue.Failed(e.Key, now)
	if msg := err.Error(); c.lastReason[e.Key] != msg {
		c.lastReason[e.Key] = msg
		c.event(u, true, ReasonNotOwned, "%s", msg)
	}
}

// clearInterrupted deletes the pods of an interrupted attempt (the placer restarted
// mid-binding) and backs the job off: a gang is never kept by halves. It reports whether there
// were any.
func (c *Controller) clearInterrupted(ctx context.Context, e *queue.Entry, job *v1alpha1.HPCJob, now time.Time) bool {
	ns, name := job.Namespace, job.Name
	left := c.jobPods(ns, name, job.UID, now)
	if len(left) == 0 {
		return false
	}
	var live []*corev1.Pod
	for _, p := range left {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	zero := int64(0)
	c.deletePods(ctx, job, live, &zero)
	c.queue.Failed(e.Key, now)
	c.log.Info("removing pods of an interrupted placement", "job", ns+"/"+name, "pods", len(left))
	return true
}

// jobBinding describes the binding of a planned job: every worker pod created (bound to its
// node with its NUMA node annotated, or unbound when minAvailable left it out), the launcher
// created at once under AtStartup, and the Running status with the placements it records.
func jobBinding(e *queue.Entry, job *v1alpha1.HPCJob, u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus, jp *hpcjob.JobPlan, now time.Time) *bindOp {
	op := &bindOp{key: e.Key, kind: opJob, entry: *e, job: job, jobObj: u, started: now, note: jp.Note, sshSecret: true,
		configMap: hpcjob.HostfileConfigMap(job, jp.Workers), service: hpcjob.Service(job)}
	placed := map[int]bool{}
	for _, pl := range jp.Result.Placements {
		placed[pl.Member] = true
		pod := jp.Pods[pl.Member]
		pod.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(pl.NUMA)
		op.targets = append(op.targets, &target{pod: pod, create: true, node: pl.Node, numa: pl.NUMA, role: v1alpha1.RoleWorker})
	}
	for i, pod := range jp.Pods {
		if !placed[i] {
			op.targets = append(op.targets, &target{pod: pod, create: true, numa: -1, role: v1alpha1.RoleWorker})
		}
	}
	if job.Spec.LauncherCreationPolicy == v1alpha1.AtStartup {
		op.targets = append(op.targets, launcherTarget(jp.Launcher, jp.Result.Launcher))
	}
	st.Phase = v1alpha1.PhaseRunning
	st.LauncherCreationTime = nil
	st.Nodes, st.Workers, st.Groups = int32(jp.Choice.Nodes), int32(jp.Choice.Workers), int32(jp.Choice.Groups)
	st.Placements = nil
	for _, pl := range jp.Result.Placements {
		w := jp.Workers[pl.Member]
		st.Placements = append(st.Placements, v1alpha1.WorkerPlacement{
			Worker: w.Name, Tasks: int32(w.Tasks), Group: int32(w.Group), Node: pl.Node, NUMANode: int32(pl.NUMA)})
	}
	msg := fmt.Sprintf("bound %d of %d workers on %d nodes", len(jp.Result.Placements), len(jp.Workers), jp.Result.NodesUsed)
	if jp.Note != "" {
		msg += "; " + jp.Note
	}
	setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonBound, msg)
	op.status = st
	return op
}

// commit records an accepted plan as assumptions (on the snapshot and for the next ones) and
// starts binding it.
func (c *Controller) commit(ctx context.Context, snap *snapshot.Snapshot, op *bindOp) {
	for _, t := range op.targets {
		if t.node == "" {
			continue
		}
		p := t.pod.DeepCopy()
		p.Spec.NodeName = t.node
		if t.numa >= 0 {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(t.numa)
		}
		c.assumed.add(p)
		if err := snap.Reserve(p); err != nil {
			c.log.Warn("reserve on snapshot failed", "pod", podKey(p), "err", err)
		}
	}
	c.queue.Remove(op.key)
	delete(c.lastReason, op.key)
	c.start(ctx, op)
	if op.job != nil {
		c.vouch(op.jobObj, c.statusOf(op.job.Namespace+"/"+op.job.Name, op.job))
	}
}

// vouch tells the snapshot cache which pods are the job's workers (snapshot.JobRecord): those its
// status places, as this placer last wrote it, and those of its bindings under way. Only these
// count as the job's on their nodes, with its spec.exclusiveNodes fence.
func (c *Controller) vouch(u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus) {
	ns, name := u.GetNamespace(), u.GetName()
	rec := snapshot.JobRecord{UID: u.GetUID(), Workers: make(map[string]string, len(st.Placements))}
	rec.Exclusive, _, _ = unstructured.NestedBool(u.Object, "spec", "exclusiveNodes")
	for _, pl := range st.Placements {
		rec.Workers[pl.Worker] = pl.Node
	}
	gangKey, expandKey := jobKeys(ns, name)
	for _, key := range []string{gangKey, expandKey} {
		if op := c.inflight[key]; op != nil {
			for _, t := range op.targets {
				if t.node != "" && t.role == v1alpha1.RoleWorker {
					rec.Workers[t.pod.Name] = t.node
				}
			}
		}
	}
	c.cache.SetJob(ns, name, rec)
}

// planOptions are the placer's settings every plan of a job is made with.
func (c *Controller) planOptions() hpcjob.Options {
	return hpcjob.Options{SchedulerName: c.opts.SchedulerName, NoTaskGroups: !c.opts.TaskGroups}
}
