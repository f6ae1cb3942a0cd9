package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Tick is one period of the loop: it re-reads the kubelet's CPU manager policy when due (and
// stops acting while the kubelet pins containers itself), starts the agent once it may, and
// then lists the container cgroups to pick up missed ones and repair drift, and brings the
// pods' I/O limits to their objectives (enforceIO) and confines Slurm jobs' processes to their
// placeholders (ConfineSlurmJobs). Every container's full values, and every
// pod's I/O limit, are re-applied each FullResyncInterval.
func (a *Agent) Tick(ctx context.Context) Report {
	now := a.d.Now()
	a.heartbeat.Store(now.UnixNano())
	a.mu.Lock()
	due := !a.started || a.refusing != "" || now.Sub(a.lastKubeletCheck) >= a.opts.KubeletCheckInterval
	a.mu.Unlock()
	if due {
		a.checkHints(ctx)
		if !a.kubeletAllows() {
			return Report{}
		}
	}
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if !started {
		rep, err := a.start(ctx)
		if err != nil {
			a.log.Error("cannot start enforcing; retrying", "reason", err.Error())
		}
		return rep
	}
	a.ticks++
	full := a.ticks%int(max(1, a.opts.FullResyncInterval/a.opts.ReconcileInterval)) == 0
	rep := a.scan(ctx, full)
	if a.ioEnabled() {
		a.enforceIO(ctx, full)
	}
	if a.confineEnabled() {
		a.ConfineSlurmJobs()
	}
	return rep
}

// scan lists the container cgroups: new ones are written, vanished ones forgotten, those whose
// cpuset differs from the decision rewritten.
func (a *Agent) scan(ctx context.Context, full bool) Report {
	var rep Report
	cgs, err := a.d.Writer.Enumerate()
	now := a.d.Now()
	a.mu.Lock()
	if err != nil {
		a.hooks.Failed(ErrEnumerate)
		if msg := err.Error(); msg != a.enumErr {
			a.enumErr = msg
			a.log.Error("cannot list container cgroups; enforcing what is known", "reason", msg)
		}
	} else {
		a.enumErr = ""
	}
	t := target{all: full}
	if err == nil {
		present := make(map[cgroup.ContainerRef]bool, len(cgs))
		for _, cg := range cgs {
			present[cg.Ref] = true
			c := a.st.ctrs[cg.Ref]
			if c == nil {
				c = &ctrState{ref: cg.Ref, seen: now, via: PathScan}
				a.st.ctrs[cg.Ref] = c
				t.refs = append(t.refs, cg.Ref)
			}
			c.observed = cg.CPUs
			a.st.nameOf(c)
			if want, _, ok := a.st.desired(c, a.mems); ok && (!want.CPUs.Equals(cg.CPUs) || !want.Mems.Equals(cg.Mems)) {
				t.refs = append(t.refs, cg.Ref)
			}
		}
		for ref := range a.st.ctrs {
			if !present[ref] {
				delete(a.st.ctrs, ref)
				rep.Vanished = append(rep.Vanished, ref)
			}
		}
		if len(rep.Vanished) > 0 {
			a.notify()
		}
	}
	if a.allocatePendingLocked(&rep) {
		t.all = true
	}
	a.mu.Unlock()
	if !t.all && len(t.refs) == 0 {
		a.saveCheckpoint()
		return rep
	}
	rep.merge(a.enforce(ctx, t))
	return rep
}

// kubeletAllows reads the kubelet's CPU manager policy and reports whether the agent may act.
// While the kubelet runs the static policy the agent writes nothing, says why on its node and in
// its readiness, and checks again at every tick.
func (a *Agent) kubeletAllows() bool {
	res, err := a.d.KubeletPolicy()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastKubeletCheck = a.d.Now()
	if err != nil {
		// A kubelet that does not answer (restarting, or without the pod-resources API) cannot
		// be told apart; the agent says so and keeps acting.
		a.hooks.Failed(ErrKubeletState)
		if msg := err.Error(); msg != a.kubeletErr {
			a.kubeletErr = msg
			a.log.Warn("cannot ask the kubelet whether it pins containers; assuming it does not", "reason", msg)
		}
		res.Policy = ""
	}
	if !res.Static() {
		if a.refusing != "" {
			a.log.Info("the kubelet no longer runs a pinning CPU manager policy; enforcing again", "podResources", res.Socket)
			a.refusing = ""
		}
		return true
	}
	reason := fmt.Sprintf("the kubelet runs the %q CPU manager policy (its pod-resources API %s offers %d CPUs for exclusive use) and pins containers itself; finegrain's node agent will not fight it and writes no cgroup: set the kubelet's cpuManagerPolicy to none (and remove its cpu_manager_state) or remove the agent from this node",
		res.Policy, res.Socket, res.CPUs)
	if a.refusing != reason {
		a.refusing = reason
		a.hooks.Failed(ErrKubeletPolicy)
		a.log.Error("refusing to act", "reason", reason)
		node := &corev1.ObjectReference{Kind: "Node", Name: a.opts.NodeName, UID: types.UID(a.opts.NodeName)}
		a.d.Recorder.Event(node, corev1.EventTypeWarning, ReasonKubeletStaticPolicy, reason)
	}
	return false
}

// ErrNotActing is returned to synchronous callers while the agent has not finished starting or
// refuses to act (a kubelet running the static CPU manager policy).
var ErrNotActing = errors.New("the node agent is not acting")
