package agent

import (
	"cmp"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Snapshot is a read-only copy of the agent's state, for reporting (free-core maps, metrics,
// inspection). Its values are never shared with the agent. The part reports read is a
// report.Snapshot — the agent's pins are report.Pins, with Written set — and the rest is what the
// inspection endpoint and the agent's own tests look at.
type Snapshot struct {
	report.Snapshot
	Node string
	// Started is false until the start-up rebuild finished; Refusing says why the agent writes
	// nothing (a kubelet with the static CPU manager policy), empty while it acts.
	Started  bool
	Refusing string
	// APISynced is false while the agent enforces from its checkpoint without the pod list.
	APISynced bool
	// Paths are the ways new containers are noticed.
	Paths []Path
	// Containers are the container cgroups below kubepods, ordered by pod UID and container ID.
	Containers []Container
	// Pods are the pods of this node the agent accounts for, ordered by UID.
	Pods []PodInfo
}

// Container is one container cgroup and what the agent wants it to carry.
type Container struct {
	Ref cgroup.ContainerRef
	// Name is empty while unknown; Sandbox marks a pod's pause container.
	Name    string
	Sandbox bool
	// Namespace and Pod are empty for a pod the agent does not know.
	Namespace, Pod string
	Exclusive      bool
	CPUs, Mems     cpuset.CPUSet
}

// PodInfo identifies a pod of this node.
type PodInfo struct {
	UID, Namespace, Name string
	// Exclusive is true for a pod that opted in to exclusive CPUs.
	Exclusive bool
}

// Snapshot returns a copy of the current state. It never waits for cgroup writes.
func (a *Agent) Snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Snapshot{Node: a.opts.NodeName, Started: a.started, Refusing: a.refusing, APISynced: a.apiSynced}
	if a.opts.SyncDecisions {
		s.Paths = append(s.Paths, PathDecide)
	}
	if a.d.Watcher != nil {
		s.Paths = append(s.Paths, PathInotify)
	}
	s.Paths = append(s.Paths, PathInformer, PathScan)
	if a.st == nil {
		return s
	}
	st := a.st
	s.Snapshot = report.SnapshotOf(st.alloc, st.gen, func(uid string) (string, string) {
		if ps := st.pods[uid]; ps != nil {
			return ps.info.Namespace, ps.info.Name
		}
		return "", ""
	})
	written := map[policy.Key]bool{}
	for ref, c := range st.ctrs {
		want, excl, _ := st.desired(c, a.mems)
		sc := Container{Ref: ref, Name: c.name, Sandbox: c.sandbox, Exclusive: excl, CPUs: want.CPUs, Mems: want.Mems}
		if ps := st.pods[string(ref.Pod.UID)]; ps != nil {
			sc.Namespace, sc.Pod = ps.info.Namespace, ps.info.Name
		}
		if c.pinned {
			written[policy.Key{PodUID: string(ref.Pod.UID), Container: c.name}] = true
		}
		s.Containers = append(s.Containers, sc)
	}
	slices.SortFunc(s.Containers, func(x, y Container) int { return cmp.Compare(x.Ref.String(), y.Ref.String()) })
	for i := range s.Pins {
		p := &s.Pins[i]
		p.Written = written[policy.Key{PodUID: p.PodUID, Container: p.Container}]
		if ps := st.pods[p.PodUID]; ps != nil {
			c, _ := ps.info.Container(p.Container)
			p.Memory = c.Memory
		}
	}
	for _, c := range s.Containers {
		if !c.Exclusive && !c.Sandbox && c.Name != "" {
			s.SharedContainers = append(s.SharedContainers, report.Container{
				PodUID: string(c.Ref.Pod.UID), Namespace: c.Namespace, Pod: c.Pod, Container: c.Name,
			})
		}
	}
	s.Fingerprinted = nil
	for uid, ps := range st.pods {
		s.Pods = append(s.Pods, PodInfo{UID: uid, Namespace: ps.info.Namespace, Name: ps.info.Name, Exclusive: ps.info.Exclusive})
		if ps.info.Fingerprinted {
			s.Fingerprinted = append(s.Fingerprinted, nrt.PodName{Namespace: ps.info.Namespace, Name: ps.info.Name})
		}
	}
	slices.SortFunc(s.Pods, func(x, y PodInfo) int { return cmp.Compare(x.UID, y.UID) })
	return s
}

// Subscribe returns a channel that receives a value after state changes; notifications
// coalesce (one pending value at most) and never block the agent. cancel stops them.
func (a *Agent) Subscribe() (changes <-chan struct{}, cancel func()) {
	ch := make(chan struct{}, 1)
	a.mu.Lock()
	a.subs[ch] = struct{}{}
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.subs, ch)
		a.mu.Unlock()
	}
}
