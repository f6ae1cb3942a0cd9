// Package cgrouptest provides Recorder, an in-memory cgroup.Writer for unit tests of code that
// drives container cgroups (the node agent). It records every call and mimics the real writer's
// observable contract: validation, write-only-on-change results, and ErrVanished for containers
// whose cgroup is gone. It must not be used outside tests and never touches the file system.
package cgrouptest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/opencontainers/cgroups"
)

var _ cgroup.Writer = (*Recorder)(nil)

// Call is one recorded Apply.
type Call struct {
	Ref    cgroup.ContainerRef
	Want   cgroup.Resources
	Result cgroup.Result
	Err    error
}

// Recorder is a fake cgroup.Writer over a set of containers held in memory. It is safe for
// concurrent use.
type Recorder struct {
	mu      sync.Mutex
	version cgroup.Version
	live    map[cgroup.ContainerRef]cgroup.Resources
	calls   []Call
}

// NewRecorder returns an empty fake that spells its writes like the real writer on version v.
func NewRecorder(v cgroup.Version) *Recorder {
	return &Recorder{version: v, live: map[cgroup.ContainerRef]cgroup.Resources{}}
}

// Add makes a container's cgroup exist with the given current values.
func (r *Recorder) Add(ref cgroup.ContainerRef, cur cgroup.Resources) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[ref] = cur
}

// Remove makes a container's cgroup vanish, as when the container exits.
func (r *Recorder) Remove(ref cgroup.ContainerRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, ref)
}

// Calls returns the Apply calls so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Apply validates like the real writer, then records as changes the values that differ from the
// container's current ones and stores them.
func (r *Recorder) Apply(ref cgroup.ContainerRef, want cgroup.Resources) (cgroup.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := r.apply(ref, want)
	r.calls = append(r.calls, Call{Ref: ref, Want: want, Result: res, Err: err})
	return res, err
}

func (r *Recorder) apply(ref cgroup.ContainerRef, want cgroup.Resources) (cgroup.Result, error) {
	if err := ref.Validate(); err != nil {
		return cgroup.Result{}, fmt.Errorf("container cgroup: %w", err)
	}
	if err := want.Validate(); err != nil {
		return cgroup.Result{}, fmt.Errorf("container %s: %w", ref, err)
	}
	cur, ok := r.live[ref]
	if !ok {
		return cgroup.Result{}, fmt.Errorf("container %s: cgroup missing: %w", ref, cgroup.ErrVanished)
	}
	old := map[string]string{}
	for _, v := range cur.Values(r.version) {
		old[v.File] = v.Data
	}
	// The kernel creates every v1 cpuset with cpuset.memory_migrate 0.
	for _, v := range (cgroup.Resources{MigrateMemory: true}).Values(r.version) {
		if _, ok := old[v.File]; !ok {
			old[v.File] = "0"
		}
	}
	var res cgroup.Result
	for _, v := range want.Values(r.version) {
		if old[v.File] != v.Data {
			res.Changes = append(res.Changes, cgroup.Write{Dir: ref.String(), File: v.File, Old: old[v.File], New: v.Data})
		}
	}
	next := merge(cur, want)
	r.live[ref] = next
	if !want.CPUs.IsEmpty() || !want.Mems.IsEmpty() {
		res.EffectiveCPUs, res.EffectiveMems = next.CPUs, next.Mems
	}
	return res, nil
}

// merge overlays the set fields of want on cur.
func merge(cur, want cgroup.Resources) cgroup.Resources {
	if !want.CPUs.IsEmpty() {
		cur.CPUs = want.CPUs
	}
	if !want.Mems.IsEmpty() {
		cur.Mems = want.Mems
	}
	if want.CPUQuota.PeriodUS != 0 {
		cur.CPUQuota = want.CPUQuota
	}
	if want.CPUShares != 0 {
		cur.CPUShares = want.CPUShares
	}
	if want.MemoryLimit != 0 {
		cur.MemoryLimit = want.MemoryLimit
	}
	cur.MigrateMemory = cur.MigrateMemory || want.MigrateMemory
	return cur
}

// Read returns the container's current values as a State whose effective sets equal its own.
func (r *Recorder) Read(ref cgroup.ContainerRef) (cgroup.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.live[ref]
	if !ok {
		return cgroup.State{}, fmt.Errorf("container %s: cgroup missing: %w", ref, cgroup.ErrVanished)
	}
	s := cgroup.State{
		Container: ref, Version: r.version,
		CPUs: cur.CPUs, Mems: cur.Mems, EffectiveCPUs: cur.CPUs, EffectiveMems: cur.Mems,
		CPUQuota: cur.CPUQuota, MemoryLimit: cur.MemoryLimit,
	}
	if r.version == cgroup.V1 {
		s.CPUShares = cur.CPUShares
	} else {
		s.CPUWeight = cgroups.ConvertCPUSharesToCgroupV2Value(cur.CPUShares)
	}
	return s, nil
}

// Enumerate lists the live containers ordered by pod UID and container ID.
func (r *Recorder) Enumerate() ([]cgroup.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]cgroup.Container, 0, len(r.live))
	for ref, cur := range r.live {
		out = append(out, cgroup.Container{
			Ref: ref, Dir: ref.String(),
			CPUs: cur.CPUs, Mems: cur.Mems, EffectiveCPUs: cur.CPUs, EffectiveMems: cur.Mems,
		})
	}
	slices.SortFunc(out, func(a, b cgroup.Container) int { return cmp.Compare(a.Ref.String(), b.Ref.String()) })
	return out, nil
}
