package nri

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/containerd/nri/pkg/api"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

const (
	// TolerateMissingAnnotation is the annotation key containerd's default validator is told to
	// read (tolerate_missing_plugins_annotation): a pod carrying it with "true" starts while the
	// plugin is absent. The node agent's own pod carries it, so the agent can always start.
	TolerateMissingAnnotation = "tolerate-missing-plugins.finegrain.dev"
	// configSourceAnnotation is set by the kubelet on every pod it runs: "api" for pods from the
	// API server, "file" or "http" for static pods, which the agent never knows by their UID.
	configSourceAnnotation = "kubernetes.io/config.source"
	sourceAPI              = "api"
)

// Refusal reasons (metrics label values).
const (
	RefusedTooLarge   = "too-large"
	RefusedNoFit      = "no-fit"
	RefusedUnknownPod = "unknown-pod"
	RefusedOther      = "other"
	RefusedValidation = "validation"
)

// query is how one container is asked about.
type query struct {
	req agent.ContainerRequest
	// pinned is true when the pod carries the opt-in label: such a container must never be
	// created without the agent's decision.
	pinned bool
	// wait is true when the agent may be asked to wait for the informer to deliver the pod: a pod
	// from the API server that asks for exclusive CPUs. Every other container is answered from
	// what the agent knows at once.
	wait bool
}

// queryFor describes a container of a pod for agent.Decide. rt names the runtime that issued
// the container ID; an ID that does not validate is left out (the agent then learns the name from
// the pod's status).
func queryFor(pod *api.PodSandbox, ctr *api.Container, rt cgroup.Runtime) query {
	q := query{req: agent.ContainerRequest{PodUID: pod.GetUid(), Container: ctr.GetName()}}
	if id := (cgroup.ContainerID{Runtime: rt, ID: ctr.GetId()}); id.Validate() == nil {
		q.req.ID = id
	}
	fromAPI := pod.GetAnnotations()[configSourceAnnotation] == sourceAPI
	q.pinned = pod.GetLabels()[classify.LabelPinning] == classify.PinningExclusive
	q.wait = q.pinned && fromAPI
	q.req.SharedIfUnknown = !q.wait
	return q
}

// adjustment returns the container adjustment that carries a decision.
func adjustment(d agent.Decision) *api.ContainerAdjustment {
	a := &api.ContainerAdjustment{}
	a.SetLinuxCPUSetCPUs(d.Resources.CPUs.String())
	a.SetLinuxCPUSetMems(d.Resources.Mems.String())
	if d.Exclusive {
		return a
	}
	if q := d.Resources.CPUQuota; q.PeriodUS != 0 {
		a.SetLinuxCPUPeriod(int64(q.PeriodUS))
		a.SetLinuxCPUQuota(q.QuotaUS)
	}
	if d.Resources.MemoryLimit != 0 {
		a.SetLinuxMemoryLimit(d.Resources.MemoryLimit)
	}
	return a
}

// cpusetUpdate moves a running container to cpus and mems; a container that stopped meanwhile is
// no failure.
func cpusetUpdate(id, cpus, mems string) *api.ContainerUpdate {
	u := &api.ContainerUpdate{ContainerId: id, IgnoreFailure: true}
	u.SetLinuxCPUSetCPUs(cpus)
	u.SetLinuxCPUSetMems(mems)
	return u
}

// refusalReason classifies why a pinned container is refused.
func refusalReason(err error) string {
	var tooLarge *policy.TooLargeError
	var noFit *policy.NoFitError
	switch {
	case errors.As(err, &tooLarge):
		return RefusedTooLarge
	case errors.As(err, &noFit):
		return RefusedNoFit
	case errors.Is(err, agent.ErrUnknownPod):
		return RefusedUnknownPod
	}
	return RefusedOther
}

// refusal is the error the runtime returns to the kubelet, which puts it in the pod's events: it
// says what happened, to which container, and what to do (the agent's errors name the container
// and the pod).
func refusal(pod *api.PodSandbox, ctr *api.Container, err error) error {
	if errors.Is(err, agent.ErrUnknownPod) {
		return fmt.Errorf("finegrain node agent refuses container %q of pod %s/%s: the pod asks for exclusive CPUs and the agent has not received it from the API server yet; the kubelet retries the container (%w)",
			ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	}
	return fmt.Errorf("finegrain node agent refuses the container: %w", err)
}

// tolerated reports whether a container may run without the plugin's decision, reading the
// toleration annotation the way containerd's default validator does.
func tolerated(pod *api.PodSandbox, container string) bool {
	a := pod.GetAnnotations()
	for _, k := range []string{TolerateMissingAnnotation + "/container." + container, TolerateMissingAnnotation + "/pod", TolerateMissingAnnotation} {
		if v, ok := a[k]; ok {
			t, err := strconv.ParseBool(v)
			return err == nil && t
		}
	}
	return false
}
