package controller

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// scheduleOne tries the first ready gang; it reports whether there was one.
func (c *Controller) scheduleOne(ctx context.Context) bool {
	now := time.Now()
	e, ok := c.queue.Next(now)
	if !ok {
		return false
	}
	switch {
	case e.Kind == queue.Gang && c.waitsForShrink(e.Key):
		c.queue.Failed(e.Key, now)
	case strings.HasPrefix(e.Key, expandPrefix):
		c.attemptExpand(ctx, e, now)
	case strings.HasPrefix(e.Key, launcherPrefix):
		c.attemptLauncher(ctx, e, now)
	case strings.HasPrefix(e.Key, "HPCJob "):
		c.attemptJob(ctx, e, now)
	default:
		c.attemptGang(ctx, e, now)
	}
	return true
}

// snapshot returns the cluster as the informers and the assumptions show it, reusing the last
// one for SnapshotTTL, or for twice as long as taking it took, whichever is longer; placements
// made since are recorded on it. Taking one costs what changed since the last: the cache copies
// only the nodes informer events or assumptions changed.
// A cluster change (capacity freed or added) makes the snapshot stale: it is then taken again
// as soon as twice its cost has passed.
func (c *Controller) snapshot(now time.Time) *snapshot.Snapshot {
	ttl := max(c.opts.SnapshotTTL, 2*c.snapCost)
	if c.snapStale {
		ttl = 2 * c.snapCost
	}
	if c.snap != nil && now.Sub(c.snapAt) < ttl {
		return c.snap
	}
	t0 := time.Now()
	c.cache.SetAssumed(c.assumed.standIns(c.cache.Pod, now))
	c.snap, c.snapAt, c.snapStale = c.cache.Snapshot(), now, false
	c.snapCost = time.Since(t0)
	return c.snap
}

// snapshotWithout returns a snapshot of its own in which the gone pods are deleted.
func (c *Controller) snapshotWithout(now time.Time, gone map[string]bool) *snapshot.Snapshot {
	c.cache.SetAssumed(c.assumed.standIns(c.cache.Pod, now))
	return c.cache.SnapshotWithout(gone)
}

// failureReason is the metrics label of a failed plan.
func failureReason(err error) string {
	var fe *plan.FitError
	if errors.As(err, &fe) {
		return string(fe.Kind())
	}
	return "error"
}

// gangFailed backs a gang off, reports why it does not fit (on the job's status, or as an
// event on its pending pods) only when the reason changes, reports its timeout once, and sees
// whether shrinking lower-priority elastic jobs would let it fit. u is nil for plain pods.
func (c *Controller) gangFailed(ctx context.Context, e *queue.Entry, u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus,
	err error, now time.Time, replan func(*snapshot.Snapshot) error, pods ...*corev1.Pod) {
	timedOut := c.queue.Failed(e.Key, now)
	c.metrics.GangFailures.WithLabelValues(failureReason(err)).Inc()
	msg := err.Error()
	reason := ReasonUnschedulable
	if e.TimedOut {
		reason = ReasonGangTimeout
	}
	if nerr := (*NotOwnedError)(nil); errors.As(err, &nerr) {
		reason = ReasonNotOwned
	}
	if timedOut {
		c.metrics.GangFailures.WithLabelValues("timeout").Inc()
		c.log.Info("gang timed out", "gang", e.Key, "waited", now.Sub(e.Created).Round(time.Second).String(), "err", msg)
	}
	changed := c.lastReason[e.Key] != reason+msg
	c.lastReason[e.Key] = reason + msg
	if u != nil {
		if setCondition(st, ConditionScheduled, metav1.ConditionFalse, reason, msg) {
			c.writeStatus(ctx, u, st)
		}
		if changed {
			c.event(u, true, reason, "%s", msg)
		}
	} else if changed {
		for _, p := range pods {
			c.event(p, true, reason, "%s", msg)
		}
	}
	var fe *plan.FitError
	if errors.As(err, &fe) {
		c.tryShrink(ctx, e, u, replan, now)
	}
}

// finish handles a binding that has ended.
func (c *Controller) finish(ctx context.Context, op *bindOp) {
	delete(c.inflight, op.key)
	if op.kind == opRescale {
		c.finishRescale(ctx, op)
		return
	}
	if op.job != nil {
		// The binding's workers are no longer vouched for as under way; those it bound are in
		// the status it writes below.
		defer func() { c.vouch(op.jobObj, c.statusOf(op.job.Namespace+"/"+op.job.Name, op.job)) }()
	}
	now := time.Now()
	err := op.failed()
	for _, t := range op.targets {
		switch {
		case t.node == "":
		case t.err == nil && (err == nil || op.kind == opGang):
			// Bound and kept (a failed HPCJob binding deletes every pod it created).
			c.assumed.done(podKey(t.pod), now, t.uid)
		default:
			c.assumed.forget(podKey(t.pod))
		}
	}
	if err != nil {
		c.bindFailed(ctx, op, err, now)
		return
	}
	c.metrics.PlacementLatency.Observe(now.Sub(op.entry.Created).Seconds())
	for _, t := range op.targets {
		if t.node != "" {
			c.metrics.BoundPods.WithLabelValues(t.role).Inc()
		}
	}
	switch op.kind {
	case opJob:
		op.status.StartTime = &metav1.Time{Time: now}
		if op.job.Spec.LauncherCreationPolicy == v1alpha1.AtStartup {
			op.status.LauncherCreationTime = op.status.StartTime
		}
		c.writeStatus(ctx, op.jobObj, op.status)
		c.event(op.jobObj, false, ReasonBound, "%s", conditionMessage(op.status, ConditionScheduled))
		c.log.Info("HPCJob bound", "job", op.job.Namespace+"/"+op.job.Name, "workers", op.status.Workers,
			"nodes", op.status.Nodes, "took", now.Sub(op.started).Round(time.Millisecond).String())
	case opExpand:
		c.writeStatus(ctx, op.jobObj, op.status)
		if op.growth != nil {
			c.startGrowth(ctx, op, now)
		} else {
			c.event(op.jobObj, false, ReasonRescaled, "%s", conditionMessage(op.status, ConditionScheduled))
		}
	case opLauncher:
		st := c.statusOf(op.job.Namespace+"/"+op.job.Name, op.job)
		if st.Phase == v1alpha1.PhaseRunning {
			st.LauncherCreationTime = &metav1.Time{Time: now}
			c.writeStatus(ctx, op.jobObj, st)
		}
		c.event(op.jobObj, false, ReasonLauncherCreated, "created launcher %s on node %s", op.targets[0].pod.Name, op.targets[0].node)
	case opGang:
		for _, t := range op.targets {
			numa := "the shared pool"
			if t.numa >= 0 {
				numa = "NUMA node " + itoa(t.numa)
			}
			c.event(t.pod, false, ReasonScheduled, "Successfully assigned %s/%s to %s (%s)", t.pod.Namespace, t.pod.Name, t.node, numa)
		}
		c.log.Debug("gang bound", "gang", op.key, "pods", len(op.targets), "took", now.Sub(op.started).Round(time.Millisecond).String())
	}
	c.mu.Lock()
	if op.job != nil {
		c.dirtyJobs[op.job.Namespace+"/"+op.job.Name] = true
	} else {
		c.dirtyGangs[op.key] = true
	}
	c.mu.Unlock()
}

// bindFailed undoes what a failed binding created (an HPCJob never keeps half a gang: its pods
// are deleted and it starts over) and backs the gang off. Plain pods that were bound stay bound
// and count toward their gang's min-available; the rest wait for the next attempt.
func (c *Controller) bindFailed(ctx context.Context, op *bindOp, err error, now time.Time) {
	c.metrics.GangFailures.WithLabelValues("bind").Inc()
	c.snap = nil
	c.log.Warn("binding failed", "gang", op.key, "err", err)
	if op.kind != opGang {
		// Only the pods this binding made (their UIDs known): a create refused because a pod of
		// that name exists made nothing, and that pod is not the job's to delete.
		var created []*corev1.Pod
		for _, t := range op.targets {
			if t.create && t.uid != "" {
				p := t.pod.DeepCopy()
				p.UID = t.uid
				created = append(created, p)
			}
		}
		zero := int64(0)
		c.deletePods(ctx, op.job, created, &zero)
	}
	reason := ReasonBindFailed
	if nerr := (*NotOwnedError)(nil); errors.As(err, &nerr) {
		reason = ReasonNotOwned
	}
	switch op.kind {
	case opJob:
		c.queue.Add(op.key, queue.Gang, op.entry.Priority, op.entry.Created, op.entry.Timeout)
		c.queue.Failed(op.key, now)
		st := c.statusOf(op.job.Namespace+"/"+op.job.Name, op.job)
		setCondition(st, ConditionScheduled, metav1.ConditionFalse, reason, err.Error())
		c.writeStatus(ctx, op.jobObj, st)
		c.event(op.jobObj, true, reason, "%v", err)
	case opExpand, opLauncher:
		c.queue.Add(op.key, queue.Expansion, op.entry.Priority, op.entry.Created, 0)
		c.queue.Failed(op.key, now)
		c.event(op.jobObj, true, reason, "%v", err)
	case opGang:
		for _, t := range op.targets {
			if t.err != nil {
				c.event(t.pod, true, ReasonBindFailed, "%v", t.err)
			}
		}
		c.mu.Lock()
		c.dirtyGangs[op.key] = true
		c.mu.Unlock()
	}
}
