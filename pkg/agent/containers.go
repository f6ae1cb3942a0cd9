package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// target is the set of container cgroups one step writes.
type target struct {
	// all writes every known container (the shared pool or an exclusive entry changed).
	all  bool
	refs []cgroup.ContainerRef
}

// CgroupEvent handles one report of the cgroup watcher: a new container is named (through the
// runtime when its pod wants exclusive CPUs) and written at once.
func (a *Agent) CgroupEvent(ctx context.Context, ev cgwatch.Event) Report {
	switch ev.Kind {
	case cgwatch.Rescan:
		return a.scan(ctx, false)
	case cgwatch.Vanished:
		var rep Report
		a.mu.Lock()
		for ref := range a.st.ctrs {
			if ref.Pod.UID == ev.Loc.Pod && (ev.Loc.Level == cgroup.LevelPod || ref.Container == ev.Loc.Container) {
				delete(a.st.ctrs, ref)
				rep.Vanished = append(rep.Vanished, ref)
			}
		}
		if len(rep.Vanished) > 0 {
			a.notify()
		}
		a.mu.Unlock()
		return rep
	case cgwatch.Appeared:
		ref, ok := ev.Loc.ContainerRef()
		if !ok {
			return Report{}
		}
		via := PathInotify
		if ev.Scanned {
			via = PathScan
		}
		a.mu.Lock()
		_, known := a.st.ctrs[ref]
		if !known {
			a.st.ctrs[ref] = &ctrState{ref: ref, seen: ev.Time, via: via}
		}
		a.mu.Unlock()
		if known {
			return Report{}
		}
		return a.enforce(ctx, target{refs: []cgroup.ContainerRef{ref}})
	}
	return Report{}
}

// enforce brings the target containers' cgroups to their decisions: the checkpoint first (so a
// crash after a write never loses an entry), then names from the runtime where a pin may be at
// stake, then the writes, shared containers before exclusive ones.
func (a *Agent) enforce(ctx context.Context, t target) Report {
	a.saveCheckpoint()
	a.mu.Lock()
	var refs []cgroup.ContainerRef
	if t.all {
		for ref := range a.st.ctrs {
			refs = append(refs, ref)
		}
	} else {
		seen := map[cgroup.ContainerRef]bool{}
		for _, ref := range t.refs {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	var ask []cgroup.ContainerRef
	for _, ref := range refs {
		if c := a.st.ctrs[ref]; c != nil {
			a.st.nameOf(c)
			if a.d.Resolver != nil && a.st.wantsExclusive(c) {
				ask = append(ask, ref)
			}
		}
	}
	a.mu.Unlock()
	a.identify(ctx, ask)
	a.mu.Lock()
	ws := a.st.plan(refs, a.mems)
	a.mu.Unlock()
	return a.execute(ws)
}

// identify asks the runtime who the containers are.
func (a *Agent) identify(ctx context.Context, refs []cgroup.ContainerRef) {
	for _, ref := range refs {
		start := a.d.Now()
		id, err := a.d.Resolver.Resolve(ctx, ref.Container)
		took := a.d.Now().Sub(start)
		a.mu.Lock()
		c := a.st.ctrs[ref]
		if c != nil {
			c.resolveTook = took
		}
		switch {
		case c == nil:
		case errors.Is(err, cri.ErrNotFound):
			// Not a container yet: a sandbox being created (containers are known to the
			// runtime before their cgroup exists). The pod's status names it if it is one.
			c.resolved = true
		case err != nil:
			a.hooks.Failed(ErrResolve)
			a.log.Warn("cannot ask the runtime for a container's name; waiting for the pod's status", "container", ref.String(), "reason", err.Error())
			c.resolved = true
		case id.PodUID != string(ref.Pod.UID):
			a.log.Warn("the runtime places a container in another pod than its cgroup does; ignoring the runtime", "container", ref.String(), "runtimePod", id.PodUID)
			c.resolved = true
		default:
			c.resolved, c.sandbox, c.name = true, id.Sandbox, id.Name
			if ps := a.st.pods[id.PodUID]; ps != nil && !id.Sandbox {
				ps.ids[ref.Container] = id.Name
			}
		}
		a.mu.Unlock()
	}
}

// execute performs planned writes and records their outcome.
func (a *Agent) execute(ws []write) Report {
	var rep Report
	for _, w := range ws {
		res, err := a.d.Writer.Apply(w.ref, w.want)
		now := a.d.Now()
		a.mu.Lock()
		a.recordLocked(w, res, err, now, &rep)
		a.mu.Unlock()
	}
	return rep
}

func (a *Agent) recordLocked(w write, res cgroup.Result, err error, now time.Time, rep *Report) {
	c := a.st.ctrs[w.ref]
	if c == nil {
		return
	}
	switch {
	case errors.Is(err, cgroup.ErrVanished):
		delete(a.st.ctrs, w.ref)
		rep.Vanished = append(rep.Vanished, w.ref)
		if w.exclusive && !c.pinned {
			a.hooks.Failed(ErrVanished)
			a.log.Info("container exited before its pin was written", "container", w.ref.String(), "name", c.name)
		}
		a.notify()
		return
	case err != nil:
		rep.Errors = append(rep.Errors, err)
		a.hooks.Failed(ErrCgroupWrite)
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			a.log.Error("cannot write container cgroup; retrying at the next resync", "container", w.ref.String(), "name", c.name, "reason", msg)
		}
		return
	}
	drifted := c.hasWritten && sameResources(c.written, w.want) && len(res.Changes) > 0
	c.lastErr, c.written, c.hasWritten, c.observed = "", w.want, true, w.want.CPUs
	// A pin counts as written when its cpus or mems were; a flag alone (v1's memory_migrate on
	// a container the runtime created with its pin) leaves the pin as it was.
	pinChanged := slices.ContainsFunc(res.Changes, cgroup.Write.SetsCPUSet)
	switch {
	case w.exclusive && pinChanged:
		rep.Pinned = append(rep.Pinned, w.ref)
	case !w.exclusive && len(res.Changes) > 0:
		rep.Shared = append(rep.Shared, w.ref)
	}
	if drifted {
		rep.Repaired = append(rep.Repaired, w.ref)
		a.hooks.DriftRepaired(w.ref)
		a.log.Info("repaired drifted container cgroup", "container", w.ref.String(), "name", c.name, "changes", len(res.Changes))
	}
	switch {
	case w.exclusive && !c.pinned:
		c.pinned = true
		window := now.Sub(c.seen)
		if c.via == PathDecide && !pinChanged {
			// The runtime created the cgroup with the pin: the container never ran without it.
			window = 0
		}
		a.hooks.PinWritten(c.via, window)
		a.log.Info("pinned container", "container", w.ref.String(), "podUID", string(w.ref.Pod.UID), "name", c.name,
			"cpus", w.want.CPUs.String(), "mems", w.want.Mems.String(), "via", string(c.via), "window", window, "resolve", c.resolveTook)
		a.notify()
	case !w.exclusive && c.pinned:
		c.pinned = false
		a.notify()
	}
}

// saveCheckpoint writes the checkpoint when the exclusive entries changed since the last write.
// Only the loop calls it, so writes never race; a failed write (a full disk) is retried at every
// step and never stops enforcement.
func (a *Agent) saveCheckpoint() {
	a.mu.Lock()
	if a.st == nil || a.st.changes == a.st.saved {
		a.mu.Unlock()
		return
	}
	seq := a.st.changes
	data, err := policy.EncodeCheckpoint(a.st.alloc.Checkpoint(a.opts.NodeName))
	a.mu.Unlock()
	start := a.d.Now()
	if err == nil {
		err = a.d.Store.Write(data)
	}
	a.hooks.CheckpointWritten(a.d.Now().Sub(start), err)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.hooks.Failed(ErrCheckpoint)
		if !a.ckptFailing {
			a.log.Error("cannot write the checkpoint; pins stay enforced from memory and the write is retried", "reason", err.Error())
		}
		a.ckptFailing = true
		return
	}
	if a.ckptFailing {
		a.log.Info("checkpoint written again")
	}
	a.ckptFailing = false
	if seq > a.st.saved {
		a.st.saved = seq
	}
}
