package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// ReasonAgentRefused is the reason of the Warning event the node agent records on a pod whose
// exclusive CPUs it cannot give (docs/interfaces.md); the pod's containers then run in the shared
// pool until the CPUs fit.
const ReasonAgentRefused = "ExclusiveCPUsUnavailable"

// ReasonPinRefused is the Scheduled=False reason of a job placed again because the node agent
// refused to pin one of its bound workers.
const ReasonPinRefused = "PinRefused"

// refusal is a node agent's refusal to pin a pod, as its event told.
type refusal struct {
	uid     types.UID
	message string
	// seen is when the placer learned of it.
	seen time.Time
}

// onEvent records an agent's refusal event for the loop.
func (c *Controller) onEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.Reason != ReasonAgentRefused || ev.InvolvedObject.Kind != "Pod" {
		return
	}
	key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	c.mu.Lock()
	c.refused[key] = refusal{uid: ev.InvolvedObject.UID, message: ev.Message, seen: time.Now()}
	c.mu.Unlock()
	c.signal()
}

// refusalDue is when the first recorded refusal's grace ends.
func (c *Controller) refusalDue() (time.Time, bool) {
	var due time.Time
	ok := false
	for _, r := range c.refusals {
		if at := r.seen.Add(c.opts.RefusalGrace); !ok || at.Before(due) {
			due, ok = at, true
		}
	}
	return due, ok
}

// checkRefusals acts on refusals whose grace has passed: a worker of a running HPCJob (a pod the
// job controls) that the agent still does not list among its node's pins makes the whole job
// start over.
func (c *Controller) checkRefusals(ctx context.Context, now time.Time) {
	for key, r := range c.refusals {
		if now.Before(r.seen.Add(c.opts.RefusalGrace)) {
			continue
		}
		delete(c.refusals, key)
		ns, name := splitKey(key)
		pod, err := c.pods.Pods(ns).Get(name)
		if err != nil || pod.UID != r.uid || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" ||
			pod.Labels[v1alpha1.LabelRole] != v1alpha1.RoleWorker || pod.Labels[v1alpha1.LabelJob] == "" || c.pinnedOnNode(pod) {
			continue
		}
		job := pod.Labels[v1alpha1.LabelJob]
		u, ok := c.jobObject(ns, job)
		if !ok {
			continue
		}
		spec, err := decodeJob(u)
		if err != nil || !controlledBy(pod, spec.UID) {
			// Only a worker the job made can make it start over, whatever labels a pod carries.
			continue
		}
		st := c.statusOf(ns+"/"+job, spec)
		if st.Phase != v1alpha1.PhaseRunning {
			continue
		}
		gangKey, expandKey := jobKeys(ns, job)
		if c.inflight[gangKey] != nil || c.inflight[expandKey] != nil {
			// A binding of this job is under way: look again once it has ended.
			r.seen = now
			c.refusals[key] = r
			continue
		}
		c.replan(ctx, u, spec, st, pod, r.message, now)
	}
}

// pinnedOnNode reports whether the node agent lists the pod among the pins of its node's
// NodeResourceTopology: it pinned the pod after all. Each zone's pins are read within the CPU
// bound of the node (nrt.MaxCPUs).
func (c *Controller) pinnedOnNode(pod *corev1.Pod) bool {
	node, _ := c.nodes.Get(pod.Spec.NodeName)
	bound := nrt.MaxCPUs(node)
	o, err := c.nrts.Get(pod.Spec.NodeName)
	if err != nil {
		return false
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	obj, err := nrt.FromUnstructured(u)
	if err != nil {
		return false
	}
	key := podKey(pod)
	for i := range obj.Zones {
		v, _ := nrt.AttributeValue(obj.Zones[i].Attributes, nrt.AttrPins)
		for e, err := range nrt.ScanPinsWithin(v, bound) {
			// A malformed entry names no pod; the zone's other entries still count.
			if err == nil && e.PodKey() == key {
				return true
			}
		}
	}
	return false
}

// replan starts a running job over because the node agent refused to pin its worker: the job
// goes back to Pending with a Scheduled=False PinRefused condition saying which worker, node and
// why, every pod of it is deleted, and it is queued again behind a back-off that grows with each
// refusal.
func (c *Controller) replan(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus,
	pod *corev1.Pod, why string, now time.Time) {
	key := job.Namespace + "/" + job.Name
	c.replans[key]++
	msg := fmt.Sprintf("the node agent on %s refused to pin worker %s (%s); the job's pods are deleted and it is placed again (refusal %d)",
		pod.Spec.NodeName, pod.Name, why, c.replans[key])
	c.metrics.GangFailures.WithLabelValues("refused").Inc()
	c.log.Warn("node agent refused a bound worker; placing the job again", "job", key, "worker", pod.Name,
		"node", pod.Spec.NodeName, "refusals", c.replans[key], "reason", why, "at", now)
	c.restart(ctx, u, job, st, ReasonPinRefused, msg, c.replans[key])
}
