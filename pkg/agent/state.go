package agent

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// state is everything the agent decides from; Agent.mu guards it.
type state struct {
	alloc *policy.Allocator
	pods  map[string]*podState
	ctrs  map[cgroup.ContainerRef]*ctrState
	// gen counts published changes (Snapshot.Generation).
	gen uint64
	// changes counts changes of the exclusive entries; saved is the count the checkpoint on disk
	// reflects.
	changes, saved uint64
	// retryAlloc is set when CPUs were released, so exclusive containers that did not fit may now.
	retryAlloc bool
}

// podState is one pod of this node as the API server last described it.
type podState struct {
	info classify.Pod
	// ids names container IDs learnt from the status, the runtime or a Decide caller; decided
	// holds those a Decide caller named before the container existed (nil until one did).
	ids     map[cgroup.ContainerID]string
	decided map[cgroup.ContainerID]bool
	// reported holds the problems and allocation failures already sent as events, so each is
	// reported once.
	reported map[string]bool
}

// ctrState is one container cgroup below kubepods.
type ctrState struct {
	ref cgroup.ContainerRef
	// name is the container's name in its pod; empty until known.
	name string
	// sandbox is true for a pod sandbox (pause) container.
	sandbox bool
	// resolved is true once the runtime was asked (whatever it answered), resolveTook how long
	// that took.
	resolved    bool
	resolveTook time.Duration
	// seen is when the agent noticed the cgroup, and via how.
	seen time.Time
	via  Path
	// pinned is true once its exclusive pin was written (the window was reported).
	pinned bool
	// observed is the cpuset the cgroup carried at the last listing.
	observed cpuset.CPUSet
	// written is what the agent last wrote successfully (hasWritten once it did); lastErr the
	// last write error, logged only when it changes.
	written    cgroup.Resources
	hasWritten bool
	lastErr    string
}

func newState(alloc *policy.Allocator) *state {
	return &state{alloc: alloc, pods: map[string]*podState{}, ctrs: map[cgroup.ContainerRef]*ctrState{}}
}

// nameOf fills in a container's name from what its pod's status or an earlier caller told, and
// marks a container a Decide caller created with its decision (PathDecide) as noticed that way.
func (s *state) nameOf(c *ctrState) {
	if c.sandbox {
		return
	}
	ps := s.pods[string(c.ref.Pod.UID)]
	if ps == nil {
		return
	}
	if ps.decided[c.ref.Container] && !c.pinned {
		c.via = PathDecide
	}
	if c.name != "" {
		return
	}
	if n, ok := ps.ids[c.ref.Container]; ok {
		c.name = n
	}
}

// wantsExclusive reports whether a container whose name is not known yet may need an exclusive
// pin, so that asking the runtime for its name is worth it before writing.
func (s *state) wantsExclusive(c *ctrState) bool {
	if c.name != "" || c.sandbox || c.resolved {
		return false
	}
	uid := string(c.ref.Pod.UID)
	if ps := s.pods[uid]; ps != nil && !ps.info.Terminal && len(ps.info.ExclusiveContainers()) > 0 {
		return true
	}
	return len(s.podAssignments(uid)) > 0
}

// desired returns what a container's cgroup should carry and whether that is an exclusive pin: a
// container whose name is unknown keeps the pin adopted from its cgroup (adoptedKey); ok is false
// when the container must be left as it is: its name is unknown but its cgroup carries one of its
// pod's pins (after a restart, before the runtime or the API server named it), which writing the
// shared pool would undo.
func (s *state) desired(c *ctrState, mems cpuset.CPUSet) (want cgroup.Resources, exclusive, ok bool) {
	shared := cgroup.Resources{CPUs: s.alloc.SharedCPUs(), Mems: mems}
	uid := string(c.ref.Pod.UID)
	if c.sandbox {
		return shared, false, true
	}
	if c.name == "" {
		if asg, ok := s.alloc.Lookup(adoptedKey(c.ref)); ok {
			return cgroup.Exclusive(asg.CPUs, asg.Mems), true, true
		}
		for _, asg := range s.podAssignments(uid) {
			if asg.CPUs.Equals(c.observed) {
				return cgroup.Resources{}, false, false
			}
		}
		return shared, false, true
	}
	if asg, ok := s.alloc.Lookup(policy.Key{PodUID: uid, Container: c.name}); ok {
		return cgroup.Exclusive(asg.CPUs, asg.Mems), true, true
	}
	if ps := s.pods[uid]; ps != nil {
		if ct, ok := ps.info.Container(c.name); ok {
			shared.CPUQuota, shared.MemoryLimit = ct.Shared.CPUQuota, ct.Shared.MemoryLimit
		}
	}
	return shared, false, true
}

// sameResources reports whether two sets of cgroup values are equal.
func sameResources(a, b cgroup.Resources) bool {
	return a.CPUs.Equals(b.CPUs) && a.Mems.Equals(b.Mems) && a.CPUQuota == b.CPUQuota &&
		a.CPUShares == b.CPUShares && a.MemoryLimit == b.MemoryLimit && a.MigrateMemory == b.MigrateMemory
}

// write is one planned Apply.
type write struct {
	ref       cgroup.ContainerRef
	want      cgroup.Resources
	exclusive bool
}

// plan returns the writes for the given containers (every known one when refs is nil): shared
// containers first, so that on cgroup v1 the shared pool has shrunk before an exclusive pin
// covering its former CPUs is written, and has grown only after a pin is gone.
func (s *state) plan(refs []cgroup.ContainerRef, mems cpuset.CPUSet) []write {
	if refs == nil {
		for ref := range s.ctrs {
			refs = append(refs, ref)
		}
	}
	var out []write
	for _, ref := range refs {
		c := s.ctrs[ref]
		if c == nil {
			continue
		}
		s.nameOf(c)
		if want, excl, ok := s.desired(c, mems); ok {
			out = append(out, write{ref: ref, want: want, exclusive: excl})
		}
	}
	sortWrites(out)
	return out
}

func sortWrites(ws []write) {
	slices.SortStableFunc(ws, func(a, b write) int {
		if a.exclusive != b.exclusive {
			if a.exclusive {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.ref.String(), b.ref.String())
	})
}

// podContainers returns the refs of a pod's known container cgroups.
func (s *state) podContainers(uid string) []cgroup.ContainerRef {
	var out []cgroup.ContainerRef
	for ref := range s.ctrs {
		if string(ref.Pod.UID) == uid {
			out = append(out, ref)
		}
	}
	return out
}

// podAssignments returns a pod's exclusive entries.
func (s *state) podAssignments(uid string) []policy.Assignment {
	var out []policy.Assignment
	for _, a := range s.alloc.Assignments() {
		if a.Key.PodUID == uid {
			out = append(out, a)
		}
	}
	return out
}
