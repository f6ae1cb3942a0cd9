package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// ReasonDeprecatedLabel is the warning event on a pod that joins its gang through the
// deprecated label pod-group.scheduling.x-k8s.io/name.
const ReasonDeprecatedLabel = "DeprecatedPodGroupLabel"

// podGroupPrefix starts the queue key of a gang of plain pods (snapshot.PodGroupKey).
const podGroupPrefix = "pod group "

// watchPodGroups feeds PodGroup events to the gangs they name: a group made, changed or deleted
// makes its gang be looked at again, and counts as a cluster change so that a gang backing off
// for want of its group is tried at once.
func (c *Controller) watchPodGroups() {
	inf := c.dynInformers.ForResource(schedv1alpha1.GroupVersionResource)
	c.podGroups = inf.Lister()
	mark := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			c.mu.Lock()
			c.dirtyGangs[snapshot.PodGroupKey(m.GetNamespace(), m.GetName())] = true
			c.changed = true
			c.mu.Unlock()
			c.signal()
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark,
	})
	c.synced = append(c.synced, inf.Informer().HasSynced)
}

// podGroup returns the PodGroup of a gang key: its object, the group as read (nil when invalid
// or missing) and, when it cannot be used, an error saying what to do.
func (c *Controller) podGroup(key string) (*unstructured.Unstructured, *schedv1alpha1.PodGroup, error) {
	ns, name := splitKey(strings.TrimPrefix(key, podGroupPrefix))
	o, err := c.podGroups.ByNamespace(ns).Get(name)
	if err != nil {
		return nil, nil, fmt.Errorf("pods of namespace %s are labelled %s=%s but there is no PodGroup %s there: create it (%s/%s, spec.minMember)",
			ns, schedv1alpha1.LabelPodGroup, name, name, schedv1alpha1.GroupName, schedv1alpha1.Version)
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("PodGroup %s/%s: unexpected object %T", ns, name, o)
	}
	pg, err := schedv1alpha1.FromUnstructured(u)
	return u, pg, err
}

// plainGang makes the gang of a plain pod gang key: the pods of a PodGroup (its minMember, once
// the cluster has its minResources free), of a group with the deprecated labels, or one pod.
func (c *Controller) plainGang(snap *snapshot.Snapshot, key string, live, pending []*corev1.Pod) (*plan.Gang, error) {
	rest, ok := strings.CutPrefix(key, podGroupPrefix)
	switch {
	case ok && plan.UsesPodGroup(live):
		_, pg, err := c.podGroup(key)
		if err != nil {
			return nil, err
		}
		if err := plan.MinResourcesFit(snap, pg, live); err != nil {
			return nil, err
		}
		return plan.PodGroupGang(pg, live)
	case ok:
		ns, name := splitKey(rest)
		return plan.PodGang(ns, name, live)
	default:
		return plan.SinglePod(pending[0]), nil
	}
}

// gangTimeout is how long a gang may wait to fit: its PodGroup's timeout (PodGroupSpec.Timeout),
// else the placer's --gang-timeout.
func (c *Controller) gangTimeout(key string, pods []*corev1.Pod) time.Duration {
	if strings.HasPrefix(key, podGroupPrefix) && plan.UsesPodGroup(pods) {
		if _, pg, err := c.podGroup(key); err == nil {
			return pg.Spec.Timeout(c.opts.GangTimeout)
		}
	}
	return c.opts.GangTimeout
}

// warnDeprecated records one warning event on each pending pod of a gang that joins it through
// the deprecated label; a gang with no pending pod forgets whom it warned.
func (c *Controller) warnDeprecated(key string, pending []*corev1.Pod) {
	if len(pending) == 0 {
		delete(c.deprecated, key)
		return
	}
	for _, p := range pending {
		name, deprecated, _ := schedv1alpha1.GroupOf(p)
		if !deprecated || c.deprecated[key][p.Name] == p.UID {
			continue
		}
		if c.deprecated[key] == nil {
			c.deprecated[key] = map[string]types.UID{}
		}
		c.deprecated[key][p.Name] = p.UID
		c.event(p, true, ReasonDeprecatedLabel,
			"label %s=%s is deprecated: label the pod %s=%s and create PodGroup %s (%s/%s) with spec.minMember in place of %s; the old label still works",
			schedv1alpha1.DeprecatedLabelPodGroup, name, schedv1alpha1.LabelPodGroup, name, name,
			schedv1alpha1.GroupName, schedv1alpha1.Version, v1alpha1.LabelPodGroupMinAvailable)
	}
}

// syncPodGroupStatus writes a standard gang's PodGroup status from its pods (assumptions applied)
// when it changed: the phase, the pods running, succeeded and failed, and when the placer first
// tried the group. A missing or invalid group is left alone.
func (c *Controller) syncPodGroupStatus(ctx context.Context, key string, pods []*corev1.Pod) {
	if !strings.HasPrefix(key, podGroupPrefix) || !plan.UsesPodGroup(pods) {
		return
	}
	u, pg, err := c.podGroup(key)
	if err != nil {
		return
	}
	var n schedv1alpha1.Counts
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			n.Succeeded++
			continue
		case corev1.PodFailed:
			n.Failed++
			continue
		case corev1.PodRunning:
			n.Running++
		}
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			n.Bound++
		}
	}
	st := pg.Status
	st.Phase = schedv1alpha1.PhaseOf(pg.Spec.MinMember, n)
	st.Running, st.Succeeded, st.Failed = n.Running, n.Succeeded, n.Failed
	if st.ScheduleStartTime == nil {
		st.ScheduleStartTime = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
	if equality.Semantic.DeepEqual(st, pg.Status) {
		return
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": u.GetUID()},
		{"op": "add", "path": "/status", "value": st},
	})
	if err == nil {
		_, err = c.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace(pg.Namespace).Patch(ctx, pg.Name,
			types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		// The next change of a pod of the group, or the informers' resync, writes it again.
		c.log.Warn("write PodGroup status failed", "podGroup", pg.Namespace+"/"+pg.Name, "err", err)
	}
}
