package nri

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"
)

// ValidateContainerAdjustment makes the plugin a validator: the runtime asks it about every
// container adjustment before creating the container. A plugin that was killed or hung while the
// runtime waited for its CreateContainer answer cannot answer this either, and the runtime then
// refuses the container instead of creating it unpinned (containerd's NRI otherwise proceeds
// without a plugin that failed). A live plugin rejects an adjustment whose cpuset is not the one
// it decided, or that another plugin took over.
func (p *Plugin) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	start := p.now()
	defer func() { p.obs.Hook(EventValidate, p.now().Sub(start)) }()
	pod, ctr := req.GetPod(), req.GetContainer()
	p.mu.Lock()
	want, ok := p.pending[ctr.GetId()]
	delete(p.pending, ctr.GetId())
	p.mu.Unlock()
	if err := p.check(req, want, ok); err != nil {
		p.obs.Refused(RefusedValidation)
		p.log.Warn("NRI: rejected a container adjustment", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "reason", err.Error())
		return err
	}
	return nil
}

// check compares a container's final adjustment with the plugin's decision.
func (p *Plugin) check(req *api.ValidateContainerAdjustmentRequest, want pending, decided bool) error {
	pod, ctr := req.GetPod(), req.GetContainer()
	what := fmt.Sprintf("container %q of pod %s/%s", ctr.GetName(), pod.GetNamespace(), pod.GetName())
	switch {
	case !decided && tolerated(pod, ctr.GetName()):
		return nil
	case !decided:
		return fmt.Errorf("finegrain's NRI plugin made no CPU decision for %s; it is not created (annotate the pod %s: \"true\" to run it without finegrain)",
			what, TolerateMissingAnnotation)
	case want.passThrough:
		return nil
	}
	self := p.opts.PluginIndex + "-" + p.opts.PluginName
	cpu := req.GetAdjust().GetLinux().GetResources().GetCpu()
	for _, f := range []struct {
		field, want, got string
		owner            func(*api.OwningPlugins, string) (string, bool)
	}{
		{"cpuset.cpus", want.cpus, cpu.GetCpus(), (*api.OwningPlugins).CPUSetCPUsOwner},
		{"cpuset.mems", want.mems, cpu.GetMems(), (*api.OwningPlugins).CPUSetMemsOwner},
	} {
		var owner string
		if owners := req.GetOwners(); owners != nil {
			owner, _ = f.owner(owners, ctr.GetId())
		}
		if f.got != f.want || owner != self {
			return fmt.Errorf("%s must get %s %q from finegrain's node agent, but the adjustment gives %q (set by plugin %q); remove the other plugin's CPU adjustments",
				what, f.field, f.want, f.got, owner)
		}
	}
	return nil
}
