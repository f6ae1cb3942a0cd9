package agent

import (
	"strings"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// A pin adopted from a cgroup while nothing can name its container (the agent started without the
// API server and the runtime did not answer) is held under an adopted key: the pod's UID and, for
// the container name, adoptedPrefix followed by the cgroup's container ID. No container name has a
// colon, so it never meets a real one. The entry keeps the CPUs out of the shared pool and the
// container on its pin; once the pod's status names the container it becomes that container's
// entry, on the same CPUs (claimAdoptedLocked).
const adoptedPrefix = "cgroup:"

// adoptedKey is the key of a pin adopted from container ref's cgroup.
func adoptedKey(ref cgroup.ContainerRef) policy.Key {
	return policy.Key{PodUID: string(ref.Pod.UID), Container: adoptedPrefix + ref.Container.String()}
}

// adoptedID returns the container ID of an adopted key's container name.
func adoptedID(name string) (cgroup.ContainerID, bool) {
	rest, ok := strings.CutPrefix(name, adoptedPrefix)
	if !ok {
		return cgroup.ContainerID{}, false
	}
	id, err := cgroup.ParseContainerID(rest)
	return id, err == nil
}

// claimAdoptedLocked settles an entry adopted under its container ID, now that the pod is known:
// when the pod names the container and the container asks for exactly those CPUs, the entry
// becomes the container's, on the same CPUs (nothing is written); otherwise it is released (the
// container is gone, or asks for something else) and the pod's own entries are made as usual.
func (a *Agent) claimAdoptedLocked(ps *podState, asg policy.Assignment, id cgroup.ContainerID, rep *Report) {
	st := a.st
	name, named := ps.info.IDs[id]
	if !named {
		name, named = ps.ids[id]
	}
	ct, ok := ps.info.Container(name)
	key := policy.Key{PodUID: ps.info.UID, Container: name}
	if _, taken := st.alloc.Lookup(key); !named || !ok || ct.CPUs != asg.CPUs.Size() || taken {
		a.releaseLocked(asg.Key, "the pin adopted from the container's cgroup is not what its pod asks for", rep)
		return
	}
	st.alloc.Release(asg.Key)
	claimed := asg
	claimed.Key = key
	st.changes++
	if err := st.alloc.Restore(claimed); err != nil {
		// The same CPUs, just released under the lock: only a bug in the allocator gets here.
		a.log.Error("cannot move an adopted pin to its container; it is allocated again", "key", asg.Key.String(), "container", name, "reason", err.Error())
		st.retryAlloc = true
		rep.Released = append(rep.Released, asg)
		a.hooks.Released(asg)
		return
	}
	a.log.Info("the pin adopted from a cgroup is its container's", "pod", ps.info.Namespace+"/"+ps.info.Name, "container", name,
		"cpus", claimed.CPUs.String())
}
