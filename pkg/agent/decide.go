package agent

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// ErrUnknownPod is returned by Decide when the agent has not seen the pod before the caller's
// deadline.
var ErrUnknownPod = errors.New("the node agent has not seen the pod")

// ContainerRequest names a container that a synchronous caller (an NRI plugin) is about to create.
type ContainerRequest struct {
	PodUID    string
	Container string
	// ID is the runtime's container ID when the caller knows it; the agent then names the
	// container's cgroup without asking the runtime, and counts its pin as made at creation
	// (PathDecide) once the cgroup is seen carrying it. The zero value is ignored.
	ID cgroup.ContainerID
	// SharedIfUnknown gives a container of a pod the agent does not know (a static pod, or one the
	// informer has not delivered before ctx ended) the shared pool instead of ErrUnknownPod,
	// unless the agent holds an exclusive entry for it (restored from its checkpoint while the
	// API server was unreachable).
	SharedIfUnknown bool
}

// Decision is what a container must be created with.
type Decision struct {
	// Exclusive is true for a pinned container.
	Exclusive bool
	// Resources are the cgroup values: the exclusive cpus and mems, or the shared pool with the
	// shared CPU quota and memory limit the operator's policy gives the container.
	Resources cgroup.Resources
	// NUMANode is the exclusive entry's node, topology.NoNUMA for a shared container.
	NUMANode topology.NUMAID
	// SharedCPUs and SharedMems are the shared pool after this decision: the values for every
	// shared container (an exclusive entry made by this call shrank it).
	SharedCPUs, SharedMems cpuset.CPUSet
}

// Decide returns what a container of a pod must carry, allocating its exclusive CPUs when it asks
// for them and does not hold them yet. It reads only the agent's memory (no API-server or cgroup
// I/O); when the pod is not known yet it waits for the informer until ctx is done. The cgroup
// writes that follow an allocation (the shared pool shrinking) happen asynchronously in the
// agent's loop. A container that asks for exclusive CPUs that do not fit gets an error wrapping
// the allocator's typed error (*policy.NoFitError, ...), so the caller can refuse it.
func (a *Agent) Decide(ctx context.Context, req ContainerRequest) (Decision, error) {
	if d, ok := a.heldEntry(req); ok {
		return d, nil
	}
	ps, err := a.waitPod(ctx, req.PodUID)
	if errors.Is(err, ErrUnknownPod) {
		return a.decideUnknown(req, err)
	}
	if err != nil {
		return Decision{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refusing != "" {
		return Decision{}, fmt.Errorf("container %q of pod %s: %w: %s", req.Container, req.PodUID, ErrNotActing, a.refusing)
	}
	st := a.st
	ct, ok := ps.info.Container(req.Container)
	if !ok {
		return Decision{}, fmt.Errorf("pod %s/%s has no container %q", ps.info.Namespace, ps.info.Name, req.Container)
	}
	if req.ID != (cgroup.ContainerID{}) && req.ID.Validate() == nil {
		ps.ids[req.ID] = req.Container
		if ps.decided == nil {
			ps.decided = map[cgroup.ContainerID]bool{}
		}
		ps.decided[req.ID] = true
	}
	key := policy.Key{PodUID: req.PodUID, Container: req.Container}
	d := Decision{NUMANode: topology.NoNUMA}
	if ct.CPUs > 0 && !ps.info.Terminal {
		asg, ok := st.alloc.Lookup(key)
		if !ok {
			asg, err = st.alloc.Allocate(policy.Request{Key: key, CPUs: ct.CPUs, NUMANode: ps.info.NUMA, AllowSplitCores: a.opts.AllowSplitCores})
			if err != nil {
				a.hooks.Failed(ErrAllocate)
				return Decision{}, fmt.Errorf("container %q of pod %s/%s cannot get %d exclusive CPUs: %w", req.Container, ps.info.Namespace, ps.info.Name, ct.CPUs, err)
			}
			a.allocatedLocked(ps, asg, &Report{})
			a.kickLoop()
		}
		d.Exclusive, d.NUMANode = true, asg.NUMANode
		d.Resources = cgroup.Exclusive(asg.CPUs, asg.Mems)
	}
	d.SharedCPUs, d.SharedMems = st.alloc.SharedCPUs(), a.mems
	if !d.Exclusive {
		d.Resources = cgroup.Resources{CPUs: d.SharedCPUs, Mems: d.SharedMems, CPUQuota: ct.Shared.CPUQuota, MemoryLimit: ct.Shared.MemoryLimit}
	}
	return d, nil
}

// heldEntry answers at once for a container of a pod the agent does not know but holds an
// exclusive entry for (restored from its checkpoint while the API server was unreachable): waiting
// for the pod would only stall the caller.
func (a *Agent) heldEntry(req ContainerRequest) (Decision, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started || a.refusing != "" || a.st.pods[req.PodUID] != nil {
		return Decision{}, false
	}
	asg, ok := a.st.alloc.Lookup(policy.Key{PodUID: req.PodUID, Container: req.Container})
	if !ok {
		return Decision{}, false
	}
	return Decision{Exclusive: true, NUMANode: asg.NUMANode, Resources: cgroup.Exclusive(asg.CPUs, asg.Mems),
		SharedCPUs: a.st.alloc.SharedCPUs(), SharedMems: a.mems}, true
}

// decideUnknown answers for a pod the agent does not know: its exclusive entry when the agent
// holds one, the shared pool when the caller accepts it, the unknown-pod error otherwise.
func (a *Agent) decideUnknown(req ContainerRequest, unknown error) (Decision, error) {
	if d, ok := a.heldEntry(req); ok {
		return d, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refusing != "" {
		return Decision{}, fmt.Errorf("container %q of pod %s: %w: %s", req.Container, req.PodUID, ErrNotActing, a.refusing)
	}
	if !req.SharedIfUnknown {
		return Decision{}, unknown
	}
	d := Decision{NUMANode: topology.NoNUMA, SharedCPUs: a.st.alloc.SharedCPUs(), SharedMems: a.mems}
	d.Resources = cgroup.Resources{CPUs: d.SharedCPUs, Mems: d.SharedMems}
	return d, nil
}

// ReleasePod returns a pod's exclusive CPUs to the shared pool: for a caller that learns first
// that the pod is gone (an NRI plugin told of its sandbox's removal). Removing one container
// releases nothing: a restarted container keeps its CPUs.
func (a *Agent) ReleasePod(podUID string) []policy.Assignment {
	a.mu.Lock()
	var rep Report
	if a.st != nil {
		a.releasePodLocked(podUID, "its pod sandbox was removed", &rep)
	}
	a.mu.Unlock()
	if len(rep.Released) > 0 {
		a.kickLoop()
	}
	return rep.Released
}

// waitPod returns the pod once the agent has started and knows it.
func (a *Agent) waitPod(ctx context.Context, uid string) (*podState, error) {
	for {
		a.mu.Lock()
		if !a.started {
			a.mu.Unlock()
			return nil, fmt.Errorf("pod %s: %w: it has not finished starting", uid, ErrNotActing)
		}
		if ps := a.st.pods[uid]; ps != nil {
			a.mu.Unlock()
			return ps, nil
		}
		ch, ok := a.waiters[uid]
		if !ok {
			ch = make(chan struct{})
			a.waiters[uid] = ch
		}
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			a.mu.Lock()
			if a.waiters[uid] == ch {
				delete(a.waiters, uid)
			}
			a.mu.Unlock()
			return nil, fmt.Errorf("pod %s: %w: %w", uid, ErrUnknownPod, ctx.Err())
		}
	}
}
