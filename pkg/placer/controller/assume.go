package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// assumptions are pods the placer has bound (or is binding) that its pod informer does not show
// bound yet. Snapshots see them as bound, so a gang placed right after another never takes
// the same room; snapshot.Build then holds their cores until the node agent reports them.
type assumptions struct {
	pods map[string]*assumed
	ttl  time.Duration
}

type assumed struct {
	// pod is a copy with spec.nodeName and the NUMA annotation set.
	pod *corev1.Pod
	// doneAt is when its binding finished (zero while in flight).
	doneAt time.Time
}

func newAssumptions(ttl time.Duration) *assumptions {
	return &assumptions{pods: map[string]*assumed{}, ttl: ttl}
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (a *assumptions) add(p *corev1.Pod) { a.pods[podKey(p)] = &assumed{pod: p} }

func (a *assumptions) done(key string, now time.Time) {
	if x, ok := a.pods[key]; ok {
		x.doneAt = now
	}
}

func (a *assumptions) forget(key string) { delete(a.pods, key) }

// settle drops an assumption the informer has caught up with: the pod shown bound to the
// assumed node, or deleted after its binding finished (a deletion seen while a pod of the same
// name is being bound is an older pod's).
func (a *assumptions) settle(key, node string) {
	x, ok := a.pods[key]
	if !ok {
		return
	}
	if (node != "" && x.pod.Spec.NodeName == node) || (node == "" && !x.doneAt.IsZero()) {
		delete(a.pods, key)
	}
}

func (a *assumptions) has(key string) bool {
	_, ok := a.pods[key]
	return ok
}

// overlay returns the informer's pods with the assumptions applied: an assumed pod replaces
// the informer's copy until that copy shows a node (then the assumption is dropped), and is
// added while the informer has not seen it at all. A finished assumption the informer never
// shows within the TTL (the pod was deleted) is dropped.
func (a *assumptions) overlay(pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	if len(a.pods) == 0 {
		return pods
	}
	out := make([]*corev1.Pod, 0, len(pods)+len(a.pods))
	seen := make(map[string]bool, len(a.pods))
	for _, p := range pods {
		k := podKey(p)
		x, ok := a.pods[k]
		switch {
		case !ok:
			out = append(out, p)
		case p.Spec.NodeName != "" || p.DeletionTimestamp != nil:
			delete(a.pods, k)
			out = append(out, p)
		default:
			seen[k] = true
			out = append(out, x.pod)
		}
	}
	for k, x := range a.pods {
		if seen[k] {
			continue
		}
		if !x.doneAt.IsZero() && now.Sub(x.doneAt) > a.ttl {
			delete(a.pods, k)
			continue
		}
		out = append(out, x.pod)
	}
	return out
}
