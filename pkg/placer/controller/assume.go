package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// assumptions are pods the placer has bound (or is binding) that its pod informer does not show
// bound yet. Snapshots see them as bound, so a gang placed right after another never takes
// the same room; the snapshot then holds their cores until the node agent reports them.
type assumptions struct {
	pods map[string]*assumed
	ttl  time.Duration
}

type assumed struct {
	// pod is a copy with spec.nodeName and the NUMA annotation set (and its UID once known).
	pod *corev1.Pod
	// doneAt is when its binding finished (zero while in flight).
	doneAt time.Time
}

// seen is what the pod informer showed of a pod: its node ("" once deleted) and UID. Pods of one
// name follow each other (a job placed again, a launcher retried), and the informer's events of
// an older one may arrive after its successor was created: the UID tells them apart.
type seen struct {
	node string
	uid  types.UID
}

func newAssumptions(ttl time.Duration) *assumptions {
	return &assumptions{pods: map[string]*assumed{}, ttl: ttl}
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (a *assumptions) add(p *corev1.Pod) { a.pods[podKey(p)] = &assumed{pod: p} }

// done records that a pod's binding finished; uid is the pod's (the API server gives a created
// pod its UID), empty when unknown.
func (a *assumptions) done(key string, now time.Time, uid types.UID) {
	if x, ok := a.pods[key]; ok {
		x.doneAt = now
		if uid != "" {
			x.pod.UID = uid
		}
	}
}

func (a *assumptions) forget(key string) { delete(a.pods, key) }

// settle drops an assumption the informer has caught up with: the pod shown bound to the
// assumed node, or deleted after its binding finished. What the informer shows of another pod
// of the same name (its UID differs from the assumed pod's, or the assumed pod is still being
// created) is an older pod's and changes nothing.
func (a *assumptions) settle(key string, s seen) {
	x, ok := a.pods[key]
	if !ok || !x.sameUID(s.uid) {
		return
	}
	if (s.node != "" && x.pod.Spec.NodeName == s.node) || (s.node == "" && !x.doneAt.IsZero()) {
		delete(a.pods, key)
	}
}

// sameUID reports whether uid may be the assumed pod's: equal to its UID, or either unknown.
func (x *assumed) sameUID(uid types.UID) bool {
	return x.pod.UID == "" || uid == "" || x.pod.UID == uid
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
		case a.stands(k, x, p, now):
			seen[k] = true
			out = append(out, x.pod)
		default:
			out = append(out, p)
		}
	}
	for k, x := range a.pods {
		if !seen[k] && a.stands(k, x, nil, now) {
			out = append(out, x.pod)
		}
	}
	return out
}

// standIns returns the assumed pods that stand in for the informer's copies, as overlay applies
// them, given the informer's copy of each (lookup: nil when it has none).
func (a *assumptions) standIns(lookup func(key string) *corev1.Pod, now time.Time) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(a.pods))
	for k, x := range a.pods {
		if a.stands(k, x, lookup(k), now) {
			out = append(out, x.pod)
		}
	}
	return out
}

// stands reports whether an assumption still stands, given the informer's copy of its pod (nil
// when it has none), and drops it when it does not: the informer's copy shows the pod bound or
// being deleted, or a finished binding's pod never showed up within the TTL.
func (a *assumptions) stands(key string, x *assumed, informer *corev1.Pod, now time.Time) bool {
	if informer != nil {
		if (informer.Spec.NodeName != "" || informer.DeletionTimestamp != nil) && x.sameUID(informer.UID) {
			delete(a.pods, key)
			return false
		}
		return true
	}
	if !x.doneAt.IsZero() && now.Sub(x.doneAt) > a.ttl {
		delete(a.pods, key)
		return false
	}
	return true
}
