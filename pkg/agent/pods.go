package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// Event reasons the agent reports on pods and on its node.
const (
	ReasonPinned              = "ExclusiveCPUs"
	ReasonPinFailed           = "ExclusiveCPUsUnavailable"
	ReasonRepaired            = "PinRepaired"
	ReasonKubeletStaticPolicy = "KubeletStaticCPUPolicy"
)

// nodePods lists and watches the pods bound to node, with a plain list then watch: streaming
// lists (watch-list) save nothing for one node's pods, and not every PodClient (client-go's fakes)
// can serve them.
func nodePods(pods PodClient, node string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}, listThenWatch{})
}

// listThenWatch tells client-go's reflector not to use streaming lists.
type listThenWatch struct{}

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// trimPod drops the parts of a pod the agent never reads, keeping the informer's cache small.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.Spec.Volumes = nil
	for _, list := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range list {
			c := &list[i]
			c.Env, c.EnvFrom, c.VolumeMounts, c.Command, c.Args = nil, nil, nil, nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		}
	}
	return p, nil
}

// podEvent is a pod the informer reported, or the marker asking to drop assignments of pods the
// API server no longer lists.
type podEvent struct {
	pod     *corev1.Pod
	uid     string
	deleted bool
	resync  bool
}

// podQueue hands pods from the informer's goroutine to the loop without ever blocking the
// informer; only the latest event of each pod is kept.
type podQueue struct {
	mu      sync.Mutex
	pending map[string]int
	events  []podEvent
	ready   chan struct{}
}

func newPodQueue() *podQueue {
	return &podQueue{pending: map[string]int{}, ready: make(chan struct{}, 1)}
}

func (q *podQueue) push(ev podEvent) {
	q.mu.Lock()
	if i, ok := q.pending[ev.uid]; ok && !ev.resync {
		q.events[i] = ev
	} else {
		q.pending[ev.uid] = len(q.events)
		q.events = append(q.events, ev)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *podQueue) drain() []podEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.pending = nil, map[string]int{}
	return evs
}

func (a *Agent) handlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.enqueue(obj, false) },
		UpdateFunc: func(_, obj any) { a.enqueue(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			a.enqueue(obj, true)
		},
	}
}

// enqueue filters again by node: the field selector is the API server's promise, not ours.
func (a *Agent) enqueue(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != a.opts.NodeName || pod.UID == "" {
		return
	}
	a.queue.push(podEvent{pod: pod, uid: string(pod.UID), deleted: deleted})
}

// DrainPods handles the pods the informer reported since the last call: it allocates exclusive
// CPUs for new opted-in pods (before their containers start), releases those of finished or
// deleted pods, and writes the affected cgroups.
func (a *Agent) DrainPods(ctx context.Context) Report {
	evs := a.queue.drain()
	if len(evs) == 0 {
		return Report{}
	}
	var rep Report
	t := target{}
	a.mu.Lock()
	for _, ev := range evs {
		switch {
		case ev.resync:
			t.all = a.dropAbsentLocked(&rep) || t.all
		case ev.deleted:
			t.all = a.podGoneLocked(ev.uid, &rep) || t.all
		default:
			changed, refs := a.podChangedLocked(ev.pod, &rep)
			t.all = changed || t.all
			t.refs = append(t.refs, refs...)
		}
	}
	if a.allocatePendingLocked(&rep) {
		t.all = true
	}
	a.mu.Unlock()
	rep.merge(a.enforce(ctx, t))
	return rep
}

// podChangedLocked records a pod's latest state. It reports whether exclusive entries changed
// (then every container must be rewritten) and the pod's containers to write otherwise.
func (a *Agent) podChangedLocked(pod *corev1.Pod, rep *Report) (bool, []cgroup.ContainerRef) {
	st := a.st
	info := classify.Classify(pod, a.classifyConfig())
	ps := st.pods[info.UID]
	if ps == nil {
		ps = &podState{ids: map[cgroup.ContainerID]string{}, reported: map[string]bool{}}
		st.pods[info.UID] = ps
		if ch, ok := a.waiters[info.UID]; ok {
			close(ch)
			delete(a.waiters, info.UID)
		}
		a.notify()
	}
	if publishedChanged(ps.info, info) {
		a.notify()
	}
	ps.info = info
	for _, p := range info.Problems {
		a.reportOnce(ps, p.Reason, p.Reason+"/"+p.Message, p.Message)
	}
	var changed bool
	if info.Terminal {
		changed = a.releasePodLocked(info.UID, "the pod finished", rep)
	} else {
		changed = a.allocatePodLocked(ps, rep)
	}
	uid, err := cgroup.ParsePodUID(info.UID)
	if err != nil {
		a.log.Warn("pod UID is not one the kubelet names cgroups after; its containers are found by the scan only", "pod", info.Namespace+"/"+info.Name, "uid", info.UID, "reason", err.Error())
		return changed, st.podContainers(info.UID)
	}
	for id, name := range info.IDs {
		ps.ids[id] = name
		ref := cgroup.ContainerRef{Pod: cgroup.PodRef{UID: uid, QOS: info.QOS}, Container: id}
		if st.ctrs[ref] == nil {
			st.ctrs[ref] = &ctrState{ref: ref, seen: a.d.Now(), via: PathInformer}
		}
	}
	return changed, st.podContainers(info.UID)
}

// publishedChanged reports whether the node's NodeResourceTopology shows the pod differently
// besides its pins: whether the pods fingerprint covers it, or the memory its containers request
// (a pinned container's comes off its NUMA node's available memory). Such a change is a change of
// the agent's state.
func publishedChanged(was, is classify.Pod) bool {
	return was.Fingerprinted != is.Fingerprinted ||
		!slices.EqualFunc(was.Containers, is.Containers, func(x, y classify.Container) bool { return x.Memory == y.Memory })
}

// allocatePodLocked makes a pod's exclusive entries match what its containers ask for.
func (a *Agent) allocatePodLocked(ps *podState, rep *Report) bool {
	st, info := a.st, ps.info
	changed := false
	for _, asg := range st.podAssignments(info.UID) {
		if id, ok := adoptedID(asg.Key.Container); ok {
			a.claimAdoptedLocked(ps, asg, id, rep)
			continue
		}
		if ct, ok := info.Container(asg.Key.Container); !ok || ct.CPUs != asg.CPUs.Size() {
			a.releaseLocked(asg.Key, "the container no longer asks for these exclusive CPUs", rep)
			changed = true
		}
	}
	for _, ct := range info.ExclusiveContainers() {
		key := policy.Key{PodUID: info.UID, Container: ct.Name}
		if _, ok := st.alloc.Lookup(key); ok {
			continue
		}
		asg, err := st.alloc.Allocate(policy.Request{Key: key, CPUs: ct.CPUs, NUMANode: info.NUMA, AllowSplitCores: a.opts.AllowSplitCores})
		if err != nil {
			a.hooks.Failed(ErrAllocate)
			a.reportOnce(ps, ReasonPinFailed, ReasonPinFailed+"/"+ct.Name,
				fmt.Sprintf("container %q runs in the shared pool until %d exclusive CPUs fit: %v", ct.Name, ct.CPUs, err))
			continue
		}
		delete(ps.reported, ReasonPinFailed+"/"+ct.Name)
		a.allocatedLocked(ps, asg, rep)
		changed = true
	}
	return changed
}

func (a *Agent) allocatedLocked(ps *podState, asg policy.Assignment, rep *Report) {
	a.st.changes++
	rep.Allocated = append(rep.Allocated, asg)
	a.hooks.Allocated(asg)
	a.log.Info("allocated exclusive CPUs", "pod", ps.info.Namespace+"/"+ps.info.Name, "container", asg.Key.Container,
		"cpus", asg.CPUs.String(), "numaNode", asg.NUMANode, "shared", a.st.alloc.SharedCPUs().String())
	a.d.Recorder.Eventf(podRef(ps.info), corev1.EventTypeNormal, ReasonPinned,
		"container %q gets exclusive CPUs %s on NUMA node %d", asg.Key.Container, asg.CPUs, asg.NUMANode)
	a.notify()
}

// allocatePendingLocked retries exclusive containers that did not fit, once CPUs came back.
func (a *Agent) allocatePendingLocked(rep *Report) bool {
	st := a.st
	if !st.retryAlloc {
		return false
	}
	st.retryAlloc = false
	uids := make([]string, 0, len(st.pods))
	for uid := range st.pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	changed := false
	for _, uid := range uids {
		if ps := st.pods[uid]; !ps.info.Terminal && a.allocatePodLocked(ps, rep) {
			changed = true
		}
	}
	return changed
}

func (a *Agent) releasePodLocked(uid, why string, rep *Report) bool {
	asgs := a.st.podAssignments(uid)
	for _, asg := range asgs {
		a.releaseLocked(asg.Key, why, rep)
	}
	return len(asgs) > 0
}

func (a *Agent) releaseLocked(key policy.Key, why string, rep *Report) {
	asg, ok := a.st.alloc.Release(key)
	if !ok {
		return
	}
	a.st.changes++
	a.st.retryAlloc = true
	rep.Released = append(rep.Released, asg)
	a.hooks.Released(asg)
	a.log.Info("released exclusive CPUs", "podUID", key.PodUID, "container", key.Container, "cpus", asg.CPUs.String(),
		"reason", why, "shared", a.st.alloc.SharedCPUs().String())
	a.notify()
}

// podGoneLocked forgets a deleted pod and releases its CPUs; its container cgroups stay known
// until they vanish, in the shared pool.
func (a *Agent) podGoneLocked(uid string, rep *Report) bool {
	changed := a.releasePodLocked(uid, "the pod was deleted", rep)
	if _, ok := a.st.pods[uid]; ok {
		delete(a.st.pods, uid)
		a.notify()
	}
	return changed
}

// dropAbsentLocked releases the entries of pods the API server no longer lists: pods deleted
// while the agent could not reach it.
func (a *Agent) dropAbsentLocked(rep *Report) bool {
	changed := false
	for _, asg := range a.st.alloc.Assignments() {
		if _, ok := a.st.pods[asg.Key.PodUID]; !ok {
			a.releaseLocked(asg.Key, "the API server no longer lists the pod", rep)
			changed = true
		}
	}
	a.apiSynced = true
	return changed
}

// reportOnce sends a Warning event about a pod the first time key is seen.
func (a *Agent) reportOnce(ps *podState, reason, key, message string) {
	if ps.reported[key] {
		return
	}
	ps.reported[key] = true
	a.log.Warn("pod needs attention", "pod", ps.info.Namespace+"/"+ps.info.Name, "reason", reason, "message", message)
	a.d.Recorder.Event(podRef(ps.info), corev1.EventTypeWarning, reason, message)
}

func podRef(p classify.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}
}
