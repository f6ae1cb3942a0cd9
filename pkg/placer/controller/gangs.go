package controller

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// gangPods returns the live pods of a plain gang (assumptions applied) and the pending ones.
func (c *Controller) gangPods(key string, now time.Time) (live, pending []*corev1.Pod) {
	for _, p := range c.groupPods(key) {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live = append(live, p)
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
		}
	}
	return live, pending
}

// groupPods returns every pod of a plain gang, terminated ones included, assumptions applied.
func (c *Controller) groupPods(key string) []*corev1.Pod {
	objs, _ := c.podIndex.ByIndex(gangIndex, key)
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			if a, ok := c.assumed.pods[podKey(p)]; ok && p.Spec.NodeName == "" {
				p = a.pod
			}
			pods = append(pods, p)
		}
	}
	return pods
}

// syncGang reports a plain gang's PodGroup status and warns of the deprecated label, and queues
// the gang while it has pending pods: at the highest priority of its pods, aged from its oldest
// pod, with its PodGroup's timeout.
func (c *Controller) syncGang(ctx context.Context, key string) {
	if c.inflight[key] != nil {
		return
	}
	live, pending := c.gangPods(key, time.Now())
	c.syncPodGroupStatus(ctx, key, c.groupPods(key))
	c.warnDeprecated(key, pending)
	if len(pending) == 0 {
		c.queue.Remove(key)
		delete(c.lastReason, key)
		return
	}
	var prio int32
	var created time.Time
	for i, p := range pending {
		if p.Spec.Priority != nil && (i == 0 || *p.Spec.Priority > prio) {
			prio = *p.Spec.Priority
		}
		if t := p.CreationTimestamp.Time; created.IsZero() || t.Before(created) {
			created = t
		}
	}
	c.queue.Add(key, queue.Gang, prio, created, c.gangTimeout(key, live))
}

// attemptGang plans a plain pod gang (or a lone pod) and, when it fits, starts binding it.
func (c *Controller) attemptGang(ctx context.Context, e *queue.Entry, now time.Time) {
	live, pending := c.gangPods(e.Key, now)
	if len(pending) == 0 {
		c.queue.Remove(e.Key)
		return
	}
	snap := c.snapshot(now)
	g, err := c.plainGang(snap, e.Key, live, pending)
	var incomplete *plan.IncompleteError
	if errors.As(err, &incomplete) {
		c.queue.Failed(e.Key, now)
		return
	}
	if err != nil {
		c.gangFailed(ctx, e, nil, nil, err, now, nil, pending...)
		return
	}
	t0 := time.Now()
	res, err := plan.Plan(snap, g)
	c.metrics.PlanDuration.Observe(time.Since(t0).Seconds())
	if err != nil {
		c.gangFailed(ctx, e, nil, nil, err, now, func(s *snapshot.Snapshot) error {
			_, err := plan.Plan(s, g)
			return err
		}, pending...)
		return
	}
	byName := make(map[string]*corev1.Pod, len(live))
	for _, p := range live {
		byName[p.Name] = p
	}
	op := &bindOp{key: e.Key, kind: opGang, entry: *e, started: now}
	for _, pl := range res.Placements {
		op.targets = append(op.targets, &target{pod: byName[g.Members[pl.Member].Name], node: pl.Node, numa: pl.NUMA, role: "pod"})
	}
	c.commit(ctx, snap, op)
}
