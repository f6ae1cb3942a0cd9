package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// A running job's life after its workers are bound: the launcher is created (at once, or once
// every worker is Ready), followed to its end, retried within runPolicy.backoffLimit, and the job
// ends when the launcher does, when a worker fails or vanishes, when an image cannot be pulled or
// when the active deadline passes; pods are then cleaned up by runPolicy.cleanPodPolicy and the
// job deleted ttlSecondsAfterFinished later.

const launcherPrefix = "launcher "

// launcherKey is the queue key of a job's launcher waiting to be created.
func launcherKey(ns, name string) string { return launcherPrefix + snapshot.HPCJobKey(ns, name) }

// ConditionWorkersReady is True once every worker of the run is Ready (its sshd accepts
// connections), False with the first worker that is not and why.
const ConditionWorkersReady = "WorkersReady"

// Reasons of the lifecycle's conditions and events.
const (
	ReasonWorkersReady    = "WorkersReady"
	ReasonWorkersNotReady = "WorkersNotReady"
	ReasonLauncherCreated = "LauncherCreated"
	ReasonWorkerFailed    = "WorkerFailed"
	ReasonImagePull       = "ImagePullFailed"
	ReasonDeadline        = "DeadlineExceeded"
	ReasonRestarting      = "Restarting"
	ReasonTTLExpired      = "TTLExpired"
)

// failure is why a run ended.
type failure struct {
	reason, msg string
	// restartJob: a retry places the whole job again (a worker is lost); otherwise only the
	// launcher is created again, on the same workers.
	restartJob bool
}

// permanentPull are the kubelet's waiting reasons that no retry of the pull can cure.
var permanentPull = map[string]bool{"ErrImageNeverPull": true, "InvalidImageName": true}

// pullFailing are the kubelet's waiting reasons of an image it could not pull.
var pullFailing = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true}

// imagePullFailure reports a pod whose image cannot be pulled: at once for a permanent reason,
// after the placer's ImagePullGrace for one the kubelet keeps retrying. It asks to be woken when
// the grace ends.
func (c *Controller) imagePullFailure(key string, p *corev1.Pod, now time.Time) (string, bool) {
	podK := podKey(p)
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		w := s.State.Waiting
		if w == nil || !pullFailing[w.Reason] {
			continue
		}
		since, seen := c.pullSince[podK]
		if !seen {
			since = now
			c.pullSince[podK] = now
		}
		msg := fmt.Sprintf("pod %s: container %s cannot get image %q: %s: %s", p.Name, s.Name, s.Image, w.Reason, w.Message)
		if permanentPull[w.Reason] || !now.Before(since.Add(c.opts.ImagePullGrace)) {
			return msg, true
		}
		c.wakeJobAt(key, since.Add(c.opts.ImagePullGrace))
		return "", false
	}
	delete(c.pullSince, podK)
	return "", false
}

// workerFailure looks at the bound workers of a running job: one deleted, failed, restarted or
// without its image ends the run.
func (c *Controller) workerFailure(job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, pods map[string]*corev1.Pod, now time.Time) *failure {
	key := job.Namespace + "/" + job.Name
	for _, pl := range st.Placements {
		p, ok := pods[pl.Worker]
		switch {
		case !ok:
			return &failure{reason: ReasonWorkerFailed, restartJob: true,
				msg: fmt.Sprintf("worker %s on node %s was deleted while the job ran", pl.Worker, pl.Node)}
		case p.DeletionTimestamp != nil:
			return &failure{reason: ReasonWorkerFailed, restartJob: true,
				msg: fmt.Sprintf("worker %s on node %s is being deleted while the job runs", pl.Worker, pl.Node)}
		case p.Status.Phase == corev1.PodFailed:
			return &failure{reason: ReasonWorkerFailed, restartJob: true,
				msg: fmt.Sprintf("worker %s on node %s failed: %s", pl.Worker, pl.Node, podFailure(p))}
		}
		for _, s := range p.Status.ContainerStatuses {
			if t := s.LastTerminationState.Terminated; s.RestartCount > 0 && t != nil {
				return &failure{reason: ReasonWorkerFailed, restartJob: true,
					msg: fmt.Sprintf("worker %s on node %s: container %s exited %d (%s) and was restarted; its ranks are gone",
						pl.Worker, pl.Node, s.Name, t.ExitCode, t.Reason)}
			}
		}
		if msg, failed := c.imagePullFailure(key, p, now); failed {
			return &failure{reason: ReasonImagePull, restartJob: true, msg: "worker " + msg}
		}
	}
	return nil
}

// workersReady reports whether every worker of the run is bound and Ready, else which is not
// and why.
func workersReady(st *v1alpha1.HPCJobStatus, pods map[string]*corev1.Pod) (bool, string) {
	if len(st.Placements) < int(st.Workers) {
		return false, fmt.Sprintf("%d of %d workers are bound", len(st.Placements), st.Workers)
	}
	for _, pl := range st.Placements {
		p := pods[pl.Worker]
		if p == nil || !podReady(p) {
			return false, fmt.Sprintf("worker %s on node %s is not ready: %s", pl.Worker, pl.Node, notReadyWhy(p))
		}
	}
	return true, fmt.Sprintf("all %d workers are ready", len(st.Placements))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notReadyWhy says what the kubelet reports of a pod that is not ready.
func notReadyWhy(p *corev1.Pod) string {
	if p == nil {
		return "its pod is not created yet"
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			return "container " + s.Name + " is waiting: " + strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
		}
	}
	switch p.Status.Phase {
	case "", corev1.PodPending:
		return "the pod is starting"
	}
	return "its readiness probe (sshd) has not passed yet"
}

// podFailure describes how a failed pod ended: a container's exit, else the pod's message.
func podFailure(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			msg := fmt.Sprintf("container %s exited %d (%s)", s.Name, t.ExitCode, t.Reason)
			if m := lastLines(t.Message, 5); m != "" {
				msg += ": " + m
			}
			return msg
		}
	}
	if p.Status.Message != "" {
		return strings.TrimSuffix(p.Status.Reason+": "+p.Status.Message, ": ")
	}
	return "pod phase Failed"
}

// lastLines keeps the last n non-empty lines of s, joined by " | ", at most 1 KiB.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	out := strings.Join(keep, " | ")
	if len(out) > 1024 {
		cut := len(out) - 1021
		for cut < len(out) && out[cut]&0xC0 == 0x80 {
			cut++
		}
		out = "..." + out[cut:]
	}
	return out
}

// syncLauncher follows the launcher of a running job whose workers are all in place: it asks for
// its creation when the workers are ready (or at once, AtStartup), ends or retries the run when
// it fails or vanishes, and ends the job when it succeeds. It reports whether the job ended.
func (c *Controller) syncLauncher(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus,
	pods map[string]*corev1.Pod, now time.Time) bool {
	ns, name := job.Namespace, job.Name
	key := ns + "/" + name
	lkey := launcherKey(ns, name)
	launcher := pods[v1alpha1.LauncherName(name)]
	ready, why := workersReady(st, pods)
	status, reason := metav1.ConditionFalse, ReasonWorkersNotReady
	if ready {
		status, reason = metav1.ConditionTrue, ReasonWorkersReady
	}
	if setCondition(st, ConditionWorkersReady, status, reason, why) {
		c.writeStatus(ctx, u, st)
	}
	switch {
	case launcher == nil:
		if c.assumed.has(ns+"/"+v1alpha1.LauncherName(name)) || c.inflight[lkey] != nil {
			return false
		}
		if st.LauncherCreationTime != nil {
			c.runFailed(ctx, u, job, st, failure{reason: ReasonLauncherGone, msg: "the launcher pod was deleted while the job ran"})
			return true
		}
		if ready || job.Spec.LauncherCreationPolicy == v1alpha1.AtStartup {
			prio, _ := c.priorityOf(job)
			c.queue.Add(lkey, queue.Expansion, prio, st.StartTime.Time, 0)
		} else {
			c.queue.Remove(lkey)
		}
		return false
	case launcher.DeletionTimestamp != nil:
		// A retry's launcher still going away; its successor follows.
		return false
	case st.LauncherCreationTime == nil && launcher.Status.Phase == corev1.PodFailed:
		// The failed launcher of the try before a retry, not yet deleted.
		zero := int64(0)
		c.deletePods(ctx, job, []*corev1.Pod{launcher}, &zero)
		return false
	case st.LauncherCreationTime == nil && c.inflight[lkey] == nil:
		// A launcher whose creation the status does not record (its write was lost).
		st.LauncherCreationTime = &metav1.Time{Time: launcher.CreationTimestamp.Time}
		c.writeStatus(ctx, u, st)
	}
	switch {
	case launcher.Status.Phase == corev1.PodSucceeded:
		c.finishJob(ctx, u, job, st, v1alpha1.PhaseSucceeded, ReasonCompleted, "the launcher exited 0")
		return true
	case launcher.Status.Phase == corev1.PodFailed:
		// mpirun ends as soon as it loses a worker, often before the worker's own end reaches
		// the placer: the run is blamed on the launcher only when no worker failure surfaces
		// within the grace (workerFailure, checked first, names the worker then).
		since, seen := c.launcherFailed[key]
		if !seen {
			since = now
			c.launcherFailed[key] = now
		}
		if now.Before(since.Add(c.opts.LauncherFailureGrace)) {
			c.wakeJobAt(key, since.Add(c.opts.LauncherFailureGrace))
			return false
		}
		delete(c.launcherFailed, key)
		c.runFailed(ctx, u, job, st, failure{reason: ReasonLauncherFail, msg: "the launcher failed: " + podFailure(launcher)})
		return true
	}
	if msg, failed := c.imagePullFailure(key, launcher, now); failed {
		c.runFailed(ctx, u, job, st, failure{reason: ReasonImagePull, msg: "launcher " + msg})
		return true
	}
	return false
}

// runFailed retries a failed run while runPolicy.backoffLimit allows (the launcher alone, or the
// whole job when a worker was lost), and ends the job as Failed otherwise.
func (c *Controller) runFailed(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, f failure) {
	limit := int32(0)
	if b := job.Spec.RunPolicy.BackoffLimit; b != nil {
		limit = *b
	}
	if st.Restarts >= limit {
		if limit > 0 {
			f.msg += fmt.Sprintf(" (runPolicy.backoffLimit %d reached)", limit)
		}
		c.finishJob(ctx, u, job, st, v1alpha1.PhaseFailed, f.reason, f.msg)
		return
	}
	st.Restarts++
	msg := fmt.Sprintf("%s; retry %d of %d", f.msg, st.Restarts, limit)
	if f.restartJob {
		c.restart(ctx, u, job, st, f.reason, msg+": the job's pods are deleted and it is placed again", int(st.Restarts))
		return
	}
	st.LauncherCreationTime = nil
	setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonRestarting, msg+": the launcher is created again on the same workers")
	c.writeStatus(ctx, u, st)
	c.event(u, true, ReasonRestarting, "%s: the launcher is created again on the same workers", msg)
	c.log.Info("HPCJob launcher retried", "job", job.Namespace+"/"+job.Name, "reason", f.reason, "retry", st.Restarts, "limit", limit)
	if l, err := c.pods.Pods(job.Namespace).Get(v1alpha1.LauncherName(job.Name)); err == nil && controlledBy(l, job.UID) && l.DeletionTimestamp == nil {
		zero := int64(0)
		c.deletePods(ctx, job, []*corev1.Pod{l}, &zero)
	}
}

// attemptLauncher creates the launcher of a running job once its workers are ready (or at once,
// AtStartup): placed in the shared pool of a node with room, preferring the node with the most
// of the job's workers.
func (c *Controller) attemptLauncher(ctx context.Context, e *queue.Entry, now time.Time) {
	ns, name := splitKey(strings.TrimPrefix(e.Key, launcherPrefix+"HPCJob "))
	u, job, st, ok := c.runningJob(ns, name)
	if !ok || st.LauncherCreationTime != nil {
		c.queue.Remove(e.Key)
		return
	}
	pod := hpcjob.LauncherPod(job, c.opts.SchedulerName)
	if err := c.nameTaken(job, pod.Name); err != nil {
		c.blocked(u, e, err, now)
		return
	}
	if l, err := c.pods.Pods(ns).Get(pod.Name); err == nil || c.assumed.has(podKey(pod)) {
		if err == nil && l.DeletionTimestamp != nil {
			// The failed launcher of the last try is still going away.
			c.queue.Failed(e.Key, now)
			return
		}
		c.queue.Remove(e.Key)
		return
	}
	g := &plan.Gang{Key: snapshot.HPCJobKey(ns, name), Groups: 1}
	if job.Spec.Placement == v1alpha1.MostLoaded {
		g.Policy = plan.MostLoaded
	}
	wc := plan.ConstraintsOf(&job.Spec.Worker.Spec)
	workers, _ := c.liveWorkers(job, now)
	for _, w := range workers {
		if w.Spec.NodeName != "" {
			g.Members = append(g.Members, plan.MemberFromPod(w, 0, wc))
		}
	}
	m := plan.MemberFromPod(pod, 0, plan.ConstraintsOf(&pod.Spec))
	g.Launcher = &m
	snap := c.snapshot(now)
	res, err := plan.Plan(snap, g)
	if err != nil {
		c.queue.Failed(e.Key, now)
		msg := "the launcher waits for room: " + err.Error()
		if c.lastReason[e.Key] != msg {
			c.lastReason[e.Key] = msg
			c.event(u, true, ReasonUnschedulable, "%s", msg)
		}
		return
	}
	op := &bindOp{key: e.Key, kind: opLauncher, entry: *e, job: job, jobObj: u, started: now,
		targets: []*target{launcherTarget(pod, res.Launcher)}}
	c.commit(ctx, snap, op)
}

// launcherTarget creates the launcher bound where the plan put it: in the shared pool, or, for a
// launcher that runs as a worker, with the NUMA node of its exclusive cores annotated.
func launcherTarget(pod *corev1.Pod, pl *plan.Placement) *target {
	if pl.NUMA >= 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(pl.NUMA)
	}
	return &target{pod: pod, create: true, node: pl.Node, numa: pl.NUMA, role: v1alpha1.RoleLauncher}
}

// restart places a running job again from scratch: it goes back to Pending with a Scheduled=False
// condition saying why, every pod of it is deleted, and it is queued again behind a back-off
// that grows with attempts.
func (c *Controller) restart(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus,
	reason, msg string, attempts int) {
	gangKey, expandKey := jobKeys(job.Namespace, job.Name)
	now := time.Now()
	st.Phase = v1alpha1.PhasePending
	st.StartTime, st.LauncherCreationTime = nil, nil
	st.Nodes, st.Workers, st.Groups = 0, 0, 0
	st.Placements = nil
	setCondition(st, ConditionScheduled, metav1.ConditionFalse, reason, msg)
	setCondition(st, ConditionWorkersReady, metav1.ConditionFalse, ReasonWorkersNotReady, "the job is placed again")
	c.writeStatus(ctx, u, st)
	c.event(u, true, reason, "%s", msg)
	var live []*corev1.Pod
	for _, p := range c.jobPods(job.Namespace, job.Name, job.UID, now) {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	zero := int64(0)
	c.deletePods(ctx, job, live, &zero)
	c.snapStale = true
	c.queue.Remove(expandKey)
	c.queue.Remove(launcherKey(job.Namespace, job.Name))
	prio, _ := c.priorityOf(job)
	c.queue.Add(gangKey, queue.Gang, prio, u.GetCreationTimestamp().Time, time.Duration(job.Spec.Gang.TimeoutSeconds)*time.Second)
	c.queue.Backoff(gangKey, attempts, now)
}

// cleanPods deletes the pods runPolicy.cleanPodPolicy names once a job has ended: Running, the
// pods that have not ended (its workers, and a launcher cut short); All, every pod; None, none.
func (c *Controller) cleanPods(ctx context.Context, job *v1alpha1.HPCJob, now time.Time) {
	policy := job.Spec.RunPolicy.CleanPodPolicy
	if policy == v1alpha1.CleanPodPolicyNone {
		return
	}
	var doomed []*corev1.Pod
	for _, p := range c.jobPods(job.Namespace, job.Name, job.UID, now) {
		if p.DeletionTimestamp != nil {
			continue
		}
		ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if policy == v1alpha1.CleanPodPolicyAll || !ended {
			doomed = append(doomed, p)
		}
	}
	c.deletePods(ctx, job, doomed, nil)
}

// expireFinished deletes a finished job once runPolicy.ttlSecondsAfterFinished has passed since
// it ended (its pods, Secret, ConfigMap and Service go with it, as the job owns them); until then
// it asks to be woken at that time.
func (c *Controller) expireFinished(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, now time.Time) {
	ttl := job.Spec.RunPolicy.TTLSecondsAfterFinished
	if ttl == nil || st.CompletionTime == nil {
		return
	}
	due := st.CompletionTime.Add(time.Duration(*ttl) * time.Second)
	key := job.Namespace + "/" + job.Name
	if now.Before(due) {
		c.wakeJobAt(key, due)
		return
	}
	uid := u.GetUID()
	policy := metav1.DeletePropagationBackground
	c.binds.Add(1)
	go func() {
		defer c.binds.Done()
		err := c.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(job.Namespace).Delete(ctx, job.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
		switch {
		case err == nil:
			c.log.Info("HPCJob deleted after its ttlSecondsAfterFinished", "job", key, "ttl", *ttl)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			c.log.Warn("delete HPCJob after its ttlSecondsAfterFinished failed; retrying", "job", key, "err", err)
			c.mu.Lock()
			c.dirtyJobs[key] = true
			c.mu.Unlock()
		}
	}()
}

// wakeJobAt asks the loop to look at a job again at t (the earliest of its requests wins).
func (c *Controller) wakeJobAt(key string, t time.Time) {
	if at, ok := c.timers[key]; !ok || t.Before(at) {
		c.timers[key] = t
	}
}

// dueTimers returns the jobs whose wake-up time has come, and forgets them.
func (c *Controller) dueTimers(now time.Time) []string {
	var due []string
	for k, t := range c.timers {
		if !now.Before(t) {
			due = append(due, k)
			delete(c.timers, k)
		}
	}
	return due
}

// nextTimer is the earliest wake-up time asked for.
func (c *Controller) nextTimer() (time.Time, bool) {
	var first time.Time
	ok := false
	for _, t := range c.timers {
		if !ok || t.Before(first) {
			first, ok = t, true
		}
	}
	return first, ok
}
