package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// start rebuilds the state from the checkpoint, the container cgroups and the pods the API server
// lists (waiting at most StartupAPITimeout for them), repairs what disagrees through
// policy.Reconcile, writes a fresh checkpoint and every cgroup, and marks the agent started.
// Without the API server it keeps every checkpoint entry and adopts every pin the cgroups carry
// (policy.PinnedCgroups), so that a restart during an API outage loses no pin and widens no
// pinned container even when the checkpoint is lost: the cgroup tree is the truth the checkpoint
// only speeds up. It catches up when the pod list arrives. Its steps:
//  1. read the checkpoint, wait for the pod list, list the container cgroups;
//  2. gather the node's pods and containers into a fresh state (gather), find the pins the
//     cgroups carry when the pod list did not come, and name the containers the runtime knows;
//  3. rebuild the CPU pools and allocate every running pod (rebuild);
//  4. write every cgroup, and catch up with the API server later if it did not answer.
func (a *Agent) start(ctx context.Context) (Report, error) {
	cp, cpErr := a.readCheckpoint()
	synced := a.waitForPods(ctx)
	if ctx.Err() != nil {
		return Report{}, ctx.Err()
	}
	cgs, err := a.d.Writer.Enumerate()
	if errors.Is(err, cgroup.ErrKubepodsMissing) {
		a.log.Warn("no kubepods cgroup yet; starting with no containers", "reason", err.Error())
		cgs, err = nil, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("list container cgroups: %w", err)
	}
	st, live, err := a.gather(cgs, synced)
	if err != nil {
		return Report{}, err
	}
	var carried map[cgroup.ContainerRef]bool
	if !synced {
		carried = a.carriedPins(cgs)
	}
	a.mu.Lock()
	a.st = st
	a.mu.Unlock()
	a.identify(ctx, a.toName(st, cp, carried))

	rep, err := a.rebuild(st, live, cp, cpErr, synced, carried)
	if err != nil {
		return Report{}, err
	}
	if !synced {
		a.log.Warn("the API server did not list this node's pods in time; enforcing from the checkpoint and the cgroups until it does",
			"timeout", a.opts.StartupAPITimeout)
		go a.awaitPods(ctx)
	}
	rep.merge(a.enforce(ctx, target{all: true}))
	return rep, nil
}

// gather makes a state with empty CPU pools holding the node's pods (when the pod list came) and
// its container cgroups, and returns the cgroups by container.
func (a *Agent) gather(cgs []cgroup.Container, synced bool) (*state, map[cgroup.ContainerRef]cgroup.Container, error) {
	empty, err := policy.New(a.d.Topology, a.policyConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("CPU pools: %w", err)
	}
	st := newState(empty)
	if synced {
		for _, obj := range a.informer.GetStore().List() {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == a.opts.NodeName {
				info := classify.Classify(pod, a.classifyConfig())
				ps := &podState{info: info, ids: map[cgroup.ContainerID]string{}, reported: map[string]bool{}}
				for id, name := range info.IDs {
					ps.ids[id] = name
				}
				st.pods[info.UID] = ps
			}
		}
	}
	live := map[cgroup.ContainerRef]cgroup.Container{}
	for _, cg := range cgs {
		live[cg.Ref] = cg
		c := &ctrState{ref: cg.Ref, seen: a.d.Now(), via: PathStartup, observed: cg.CPUs}
		st.nameOf(c)
		st.ctrs[cg.Ref] = c
	}
	return st, live, nil
}

// carriedPins returns the containers whose cgroups carry an exclusive pin (policy.PinnedCgroups).
func (a *Agent) carriedPins(cgs []cgroup.Container) map[cgroup.ContainerRef]bool {
	sets := make([]policy.CgroupCPUs, len(cgs))
	for i, cg := range cgs {
		sets[i] = policy.CgroupCPUs{CPUs: cg.CPUs, Mems: cg.Mems}
	}
	out := map[cgroup.ContainerRef]bool{}
	for i, pinned := range policy.PinnedCgroups(a.d.Topology, sets) {
		if pinned {
			out[cgs[i].Ref] = true
		}
	}
	return out
}

// rebuild reconciles the checkpoint with what the cgroups and the pods say into the state's CPU
// pools, reporting every repair, allocates every pod that has not ended, and marks the agent
// started. carried are the containers whose cgroups carry a pin, found without the pod list. On
// failure it leaves the agent without state.
func (a *Agent) rebuild(st *state, live map[cgroup.ContainerRef]cgroup.Container, cp *policy.Checkpoint, cpErr error, synced bool,
	carried map[cgroup.ContainerRef]bool) (Report, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	observed := observe(st, live, cp, synced, carried)
	alloc, repairs, err := policy.Reconcile(policy.ReconcileInput{
		Topology: a.d.Topology, Config: a.policyConfig(), Host: a.opts.NodeName,
		Checkpoint: cp, CheckpointErr: cpErr, Observed: observed,
	})
	if err != nil {
		a.st = nil
		return Report{}, fmt.Errorf("rebuild the CPU pools: %w", err)
	}
	st.alloc = alloc
	st.changes = 1
	for _, r := range repairs {
		a.reportRepairLocked(r)
	}
	var rep Report
	for _, ps := range st.pods {
		if !ps.info.Terminal {
			a.allocatePodLocked(ps, &rep)
		}
	}
	a.started, a.apiSynced = true, synced
	close(a.startedCh)
	a.notify()
	a.log.Info("started enforcing", "pods", len(st.pods), "containers", len(st.ctrs), "exclusive", alloc.Len(),
		"shared", alloc.SharedCPUs().String(), "reserved", alloc.ReservedCPUs().String(), "apiServer", synced, "repairs", len(repairs))
	return rep, nil
}

func (a *Agent) readCheckpoint() (*policy.Checkpoint, error) {
	data, err := a.d.Store.Read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	}
	cp, err := policy.DecodeCheckpoint(data)
	if err != nil {
		return nil, err
	}
	return &cp, nil
}

func (a *Agent) waitForPods(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, a.opts.StartupAPITimeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), a.podsSynced)
}

// awaitPods waits for the pod list after a start without it, then asks the loop to drop the
// entries of pods that are gone.
func (a *Agent) awaitPods(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), a.podsSynced) {
		a.log.Info("the API server listed this node's pods; resyncing")
		a.queue.push(podEvent{resync: true})
	}
}

// toName returns the containers whose names decide a pin: those of opted-in pods and, without
// the API server, of pods the checkpoint holds CPUs for and those whose cgroups carry a pin.
func (a *Agent) toName(st *state, cp *policy.Checkpoint, carried map[cgroup.ContainerRef]bool) []cgroup.ContainerRef {
	if a.d.Resolver == nil {
		return nil
	}
	held := map[string]bool{}
	if cp != nil {
		for _, e := range cp.Assignments {
			held[e.Key.PodUID] = true
		}
	}
	var out []cgroup.ContainerRef
	for ref, c := range st.ctrs {
		if c.name != "" {
			continue
		}
		ps := st.pods[string(ref.Pod.UID)]
		if (ps != nil && len(ps.info.ExclusiveContainers()) > 0) || held[string(ref.Pod.UID)] || carried[ref] {
			out = append(out, ref)
		}
	}
	return out
}

// observe lists the containers that should hold exclusive CPUs, with what their cgroups carry:
// from the pod list when the API server answered; otherwise from the checkpoint, and every
// container whose cgroup carries a pin (carried) that no checkpoint entry describes, under its
// name, or under its adopted key (adoptedKey) when nothing named it. A container whose cgroup
// does not exist yet is described by its checkpoint entry (nothing to disagree with) or as
// unpinned.
func observe(st *state, live map[cgroup.ContainerRef]cgroup.Container, cp *policy.Checkpoint, synced bool,
	carried map[cgroup.ContainerRef]bool) []policy.Observed {
	byName := map[policy.Key]cgroup.Container{}
	for ref, c := range st.ctrs {
		if c.name != "" {
			byName[policy.Key{PodUID: string(ref.Pod.UID), Container: c.name}] = live[ref]
		}
	}
	entries := map[policy.Key]policy.Assignment{}
	if cp != nil {
		for _, e := range cp.Assignments {
			entries[e.Key] = e
		}
	}
	describe := func(key policy.Key, n int) policy.Observed {
		o := policy.Observed{Key: key, RequestedCPUs: n, CPUs: cpuset.New(), Mems: cpuset.New()}
		if cg, ok := byName[key]; ok {
			o.CPUs, o.Mems = cg.CPUs, cg.Mems
		} else if e, ok := entries[key]; ok {
			o.CPUs, o.Mems = e.CPUs, e.Mems
		}
		return o
	}
	var out []policy.Observed
	if !synced {
		for key, e := range entries {
			out = append(out, describe(key, e.CPUs.Size()))
		}
		return append(out, adopted(st, live, entries, carried)...)
	}
	for uid, ps := range st.pods {
		if ps.info.Terminal {
			continue
		}
		for _, ct := range ps.info.ExclusiveContainers() {
			out = append(out, describe(policy.Key{PodUID: uid, Container: ct.Name}, ct.CPUs))
		}
	}
	return out
}

// adopted describes the containers whose cgroups carry a pin that no checkpoint entry holds: of
// the size they carry, keyed by name when the runtime named them, else by adoptedKey. Sandboxes
// hold no pin.
func adopted(st *state, live map[cgroup.ContainerRef]cgroup.Container, entries map[policy.Key]policy.Assignment,
	carried map[cgroup.ContainerRef]bool) []policy.Observed {
	held := cpuset.New()
	for _, e := range entries {
		held = held.Union(e.CPUs)
	}
	var out []policy.Observed
	for ref := range carried {
		c, cg := st.ctrs[ref], live[ref]
		if c == nil || c.sandbox || cg.CPUs.Intersection(held).Size() > 0 {
			continue
		}
		key := adoptedKey(ref)
		if c.name != "" {
			key = policy.Key{PodUID: string(ref.Pod.UID), Container: c.name}
		}
		if _, ok := entries[key]; ok {
			continue
		}
		out = append(out, policy.Observed{Key: key, RequestedCPUs: cg.CPUs.Size(), CPUs: cg.CPUs, Mems: cg.Mems})
	}
	slices.SortFunc(out, func(a, b policy.Observed) int {
		return cmp.Or(cmp.Compare(a.Key.PodUID, b.Key.PodUID), cmp.Compare(a.Key.Container, b.Key.Container))
	})
	return out
}

// reportRepairLocked logs a start-up repair and tells the pod concerned.
func (a *Agent) reportRepairLocked(r policy.Repair) {
	a.hooks.Reconciled(r)
	level := slog.LevelInfo
	switch r.Action {
	case policy.ActionDrop, policy.ActionRebuild, policy.ActionUseConfig:
		level = slog.LevelWarn
	}
	a.log.Log(context.Background(), level, "start-up repair", "reason", string(r.Reason), "action", string(r.Action),
		"podUID", r.Key.PodUID, "container", r.Key.Container, "cpus", r.CPUs.String(), "detail", r.Detail)
	if ps := a.st.pods[r.Key.PodUID]; ps != nil && r.Action != policy.ActionAdopt {
		a.d.Recorder.Event(podRef(ps.info), corev1.EventTypeWarning, ReasonRepaired, r.String())
	}
}
