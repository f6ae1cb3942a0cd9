package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// ConditionSuspended is True while a job is suspended (runPolicy.suspend), False with reason
// Resumed once it is not any more: MPI Operator's condition of the same name.
const ConditionSuspended = "Suspended"

// Reasons of the Suspended condition, also the reasons of the events.
const (
	ReasonSuspended = "Suspended"
	ReasonResumed   = "Resumed"
)

const suspendedMessage = "the job is suspended (runPolicy.suspend: true): it has no pods and holds no cores; set runPolicy.suspend to false to place it again"

// suspended applies runPolicy.suspend and reports whether the job stays suspended. A job that
// has not finished and asks to be suspended leaves the queue, loses its pods (its cores go back
// to the nodes; its Secret, ConfigMap and Service stay) and its placements and start time, and is
// Suspended; a binding of it under way is let finish first (its end looks at the job again). A
// Suspended job that no longer asks goes back to Pending and is placed again from scratch.
func (c *Controller) suspended(ctx context.Context, u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus) bool {
	if st.Phase == v1alpha1.PhaseSucceeded || st.Phase == v1alpha1.PhaseFailed {
		return false
	}
	if !job.Spec.RunPolicy.Suspend {
		if st.Phase == v1alpha1.PhaseSuspended {
			st.Phase = v1alpha1.PhasePending
			setCondition(st, ConditionSuspended, metav1.ConditionFalse, ReasonResumed, "the job is resumed (runPolicy.suspend: false) and waits to be placed")
			setCondition(st, ConditionScheduled, metav1.ConditionFalse, ReasonUnschedulable, "waiting to be placed")
			c.writeStatus(ctx, u, st)
			c.event(u, false, ReasonResumed, "resumed: the job waits to be placed again")
		}
		return false
	}
	gangKey, expandKey := jobKeys(job.Namespace, job.Name)
	launcher := launcherKey(job.Namespace, job.Name)
	if c.inflight[gangKey] != nil || c.inflight[expandKey] != nil || c.inflight[launcher] != nil {
		return true
	}
	c.queue.Remove(gangKey)
	c.queue.Remove(expandKey)
	c.queue.Remove(launcher)
	var live []*corev1.Pod
	for _, p := range c.jobPods(job.Namespace, job.Name, job.UID, time.Now()) {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	c.deletePods(ctx, job, live, nil)
	if st.Phase == v1alpha1.PhaseSuspended {
		return true
	}
	if st.Phase == "" {
		st.SubmitTime = ptrTime(u.GetCreationTimestamp())
		setCondition(st, ConditionValid, metav1.ConditionTrue, ReasonValid, "the spec is valid")
	}
	st.Phase = v1alpha1.PhaseSuspended
	st.StartTime, st.LauncherCreationTime = nil, nil
	st.Nodes, st.Workers, st.Groups = 0, 0, 0
	st.Placements = nil
	setCondition(st, ConditionSuspended, metav1.ConditionTrue, ReasonSuspended, suspendedMessage)
	setCondition(st, ConditionScheduled, metav1.ConditionFalse, ReasonSuspended, suspendedMessage)
	if meta.FindStatusCondition(st.Conditions, ConditionWorkersReady) != nil {
		setCondition(st, ConditionWorkersReady, metav1.ConditionFalse, ReasonWorkersNotReady, "the job is suspended")
	}
	c.writeStatus(ctx, u, st)
	c.event(u, false, ReasonSuspended, "suspended: %d pods deleted, the job keeps its SSH identity, hostfile ConfigMap and Service", len(live))
	c.snapStale = true
	return true
}
