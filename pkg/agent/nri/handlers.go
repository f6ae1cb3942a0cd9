package nri

import (
	"context"
	"errors"

	"github.com/containerd/nri/pkg/api"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// The handlers the runtime calls; the stub finds them by their interfaces.
var (
	_ interface {
		Configure(context.Context, string, string, string) (api.EventMask, error)
		Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error)
		CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error)
		UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error)
		StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error)
		RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error
		RemovePodSandbox(context.Context, *api.PodSandbox) error
		ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error
	} = (*Plugin)(nil)
)

// Configure learns which runtime issues the container IDs and its request timeout.
func (p *Plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runtime = cgroup.RuntimeContainerd
	if runtime == "cri-o" {
		p.runtime = cgroup.RuntimeCRIO
	}
	p.podWait = p.opts.PodWait
	if p.stub != nil {
		// The stub learnt the runtime's request timeout before calling Configure; past it the
		// runtime drops the plugin, so the wait for a pod stays well inside it.
		if t := p.stub.RequestTimeout(); t > 0 && p.podWait > t/2 {
			p.podWait = t / 2
		}
	}
	p.log.Info("NRI plugin registered", "runtime", runtime, "version", version, "plugin", p.opts.PluginIndex+"-"+p.opts.PluginName, "podWait", p.podWait)
	return 0, nil
}

// decide asks the agent about one container, waiting for the pod only when q says so.
func (p *Plugin) decide(ctx context.Context, q query) (agent.Decision, error) {
	p.mu.Lock()
	wait := p.podWait
	p.mu.Unlock()
	if !q.wait {
		wait = 0
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return p.agent.Decide(ctx, q.req)
}

// CreateContainer returns the container's cpuset (and, for a shared container, the quota and
// memory limit the operator's policy gives it) and moves the running shared containers to the
// shared pool when the decision shrank it. A container of a pod asking for exclusive CPUs that
// the agent cannot pin is refused with the reason, which the kubelet reports on the pod.
func (p *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	start := p.now()
	defer func() { p.obs.Hook(EventCreateContainer, p.now().Sub(start)) }()
	p.mu.Lock()
	rt := p.runtime
	p.mu.Unlock()
	q := queryFor(pod, ctr, rt)
	d, err := p.decide(ctx, q)
	switch {
	case errors.Is(err, agent.ErrNotActing):
		p.passThrough(ctr, pod)
		p.log.Debug("NRI: the agent does not act; container left as the runtime made it", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "reason", err.Error())
		return nil, nil, nil
	case err != nil && q.pinned:
		reason := refusalReason(err)
		p.obs.Refused(reason)
		p.log.Warn("NRI: refused a container that asks for exclusive CPUs", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "why", reason, "reason", err.Error())
		return nil, nil, refusal(pod, ctr, err)
	case err != nil:
		p.passThrough(ctr, pod)
		p.log.Warn("NRI: no decision for a shared container; the agent's loop writes it once the pod is known", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "reason", err.Error())
		return nil, nil, nil
	}
	cpus, mems := d.Resources.CPUs.String(), d.Resources.Mems.String()
	p.mu.Lock()
	p.ctrs[ctr.GetId()] = &tracked{podUID: pod.GetUid(), name: ctr.GetName(), managed: true, exclusive: d.Exclusive, cpus: cpus, mems: mems}
	p.pending[ctr.GetId()] = pending{cpus: cpus, mems: mems}
	updates := p.sharedUpdatesLocked(d, ctr.GetId())
	p.mu.Unlock()
	took := p.now().Sub(start)
	if d.Exclusive {
		p.log.Info("NRI: container created pinned", "pod", pod.GetNamespace()+"/"+pod.GetName(), "podUID", pod.GetUid(), "container", ctr.GetName(),
			"cpus", cpus, "mems", mems, "numaNode", d.NUMANode, "sharedUpdates", len(updates), "took", took)
	} else {
		p.log.Debug("NRI: container created in the shared pool", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(),
			"cpus", cpus, "sharedUpdates", len(updates), "took", took)
	}
	return adjustment(d), updates, nil
}

// passThrough records a container the plugin leaves as the runtime made it.
func (p *Plugin) passThrough(ctr *api.Container, pod *api.PodSandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctrs[ctr.GetId()] = &tracked{podUID: pod.GetUid(), name: ctr.GetName()}
	p.pending[ctr.GetId()] = pending{passThrough: true}
}

// sharedUpdatesLocked moves every managed shared container other than except to the shared pool
// of d where it is not there yet.
func (p *Plugin) sharedUpdatesLocked(d agent.Decision, except string) []*api.ContainerUpdate {
	cpus, mems := d.SharedCPUs.String(), d.SharedMems.String()
	var out []*api.ContainerUpdate
	for id, t := range p.ctrs {
		if id == except || !t.managed || t.exclusive || (t.cpus == cpus && t.mems == mems) {
			continue
		}
		t.cpus, t.mems = cpus, mems
		out = append(out, cpusetUpdate(id, cpus, mems))
	}
	return out
}

// UpdateContainer keeps the container on what the agent decided whatever the kubelet sends (an
// in-place resize carries no cpuset, or a stale one).
func (p *Plugin) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, _ *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	start := p.now()
	defer func() { p.obs.Hook(EventUpdateContainer, p.now().Sub(start)) }()
	p.mu.Lock()
	rt := p.runtime
	p.mu.Unlock()
	q := queryFor(pod, ctr, rt)
	q.wait = false
	d, err := p.decide(ctx, q)
	if err != nil {
		p.log.Debug("NRI: container update left as the kubelet asked", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "reason", err.Error())
		return nil, nil
	}
	cpus, mems := d.Resources.CPUs.String(), d.Resources.Mems.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctrs[ctr.GetId()] = &tracked{podUID: pod.GetUid(), name: ctr.GetName(), managed: true, exclusive: d.Exclusive, cpus: cpus, mems: mems}
	return append([]*api.ContainerUpdate{cpusetUpdate(ctr.GetId(), cpus, mems)}, p.sharedUpdatesLocked(d, ctr.GetId())...), nil
}

// StopContainer forgets a container that no longer runs; its CPUs stay with its pod, so a
// restarted container gets them back (the agent releases them when the pod ends or its sandbox
// is removed).
func (p *Plugin) StopContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.forget(ctr.GetId())
	return nil, nil
}

// RemoveContainer forgets a container.
func (p *Plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	p.forget(ctr.GetId())
	return nil
}

func (p *Plugin) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ctrs, id)
	delete(p.pending, id)
}

// RemovePodSandbox returns the pod's exclusive CPUs to the shared pool: none of its containers
// runs again. The agent's loop widens the shared containers' cgroups.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	start := p.now()
	defer func() { p.obs.Hook(EventRemovePod, p.now().Sub(start)) }()
	released := p.agent.ReleasePod(pod.GetUid())
	p.mu.Lock()
	for id, t := range p.ctrs {
		if t.podUID == pod.GetUid() {
			delete(p.ctrs, id)
		}
	}
	p.mu.Unlock()
	for _, asg := range released {
		p.log.Info("NRI: released the CPUs of a removed pod sandbox", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", asg.Key.Container, "cpus", asg.CPUs.String())
	}
	return nil
}

// Synchronize rebuilds what the plugin knows from the runtime's pods and containers (sent on
// every connection) and moves each running container the agent decides about to its decision:
// containers created while the plugin was away (tolerated, or on a runtime that fails open) are
// pinned or put in the shared pool here.
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	start := p.now()
	defer func() { p.obs.Hook(EventSynchronize, p.now().Sub(start)) }()
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		byID[pod.GetId()] = pod
	}
	p.mu.Lock()
	rt := p.runtime
	p.mu.Unlock()
	known := map[string]*tracked{}
	var updates []*api.ContainerUpdate
	var last agent.Decision
	decided, pinned := 0, 0
	for _, ctr := range ctrs {
		st := ctr.GetState()
		if st != api.ContainerState_CONTAINER_CREATED && st != api.ContainerState_CONTAINER_RUNNING {
			continue
		}
		pod := byID[ctr.GetPodSandboxId()]
		if pod == nil {
			continue
		}
		q := queryFor(pod, ctr, rt)
		q.wait = false
		d, err := p.decide(ctx, q)
		cur := ctr.GetLinux().GetResources().GetCpu()
		t := &tracked{podUID: pod.GetUid(), name: ctr.GetName(), cpus: cur.GetCpus(), mems: cur.GetMems()}
		known[ctr.GetId()] = t
		if err != nil {
			p.log.Debug("NRI: no decision for a running container at synchronisation", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "reason", err.Error())
			continue
		}
		last = d
		decided++
		t.managed, t.exclusive = true, d.Exclusive
		if d.Exclusive {
			pinned++
			cpus, mems := d.Resources.CPUs.String(), d.Resources.Mems.String()
			if t.cpus != cpus || t.mems != mems {
				t.cpus, t.mems = cpus, mems
				updates = append(updates, cpusetUpdate(ctr.GetId(), cpus, mems))
			}
		}
	}
	p.mu.Lock()
	p.ctrs, p.pending = known, map[string]pending{}
	if decided > 0 {
		updates = append(updates, p.sharedUpdatesLocked(last, "")...)
	}
	p.connectedAt = p.now()
	p.mu.Unlock()
	p.obs.Connected(true)
	p.log.Info("NRI plugin synchronised with the runtime", "pods", len(pods), "containers", len(ctrs), "decided", decided, "pinned", pinned, "updates", len(updates))
	return updates, nil
}
