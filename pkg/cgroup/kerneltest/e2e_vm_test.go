package kerneltest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
	"github.com/finegrain-dev/finegrain/test/vm"
	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"
)

// TestGuestAllocatorEndToEnd runs the node agent's pipeline on the real kernel: discover the
// guest's topology, allocate one whole core per NUMA node with the allocator, narrow the shared
// pool (Burstable and BestEffort containers of spinning threads, the Burstable one with CPU quota,
// shares and a memory limit) and pin each worker through the cgroup writer; refuse what cannot fit without
// touching a cgroup; release a worker (the pool grows) and admit a new one (it shrinks). Every
// step is checked on the processes' threads, and against what qemu was told.
func TestGuestAllocatorEndToEnd(t *testing.T) {
	for _, d := range []cgroup.Driver{cgroup.Cgroupfs, cgroup.Systemd} {
		t.Run(string(d), func(t *testing.T) {
			m, k := guestKernel(t, d)
			topo, err := topology.Discover("/sys")
			if err != nil {
				t.Fatal(err)
			}
			a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0), MinSharedCPUs: 1})
			if err != nil {
				t.Fatal(err)
			}
			e := &e2e{t: t, m: m, k: k, topo: topo, a: a, procs: map[cgroup.ContainerRef]*proc{}, pins: map[policy.Key]cgroup.ContainerRef{}}
			e.startShared()
			for _, id := range cpuNodes(m) {
				e.admit(id, fmt.Sprintf("rank-%d", id))
			}
			e.refusalsChangeNothing()

			first := cpuNodes(m)[0]
			e.release(fmt.Sprintf("rank-%d", first))
			e.admit(first, "rank-again")
			if err := a.Verify(); err != nil {
				t.Errorf("allocator invariants after the run: %v", err)
			}
			e.checkSharedLimits()
		})
	}
}

// e2e is one run of the pipeline.
type e2e struct {
	t      *testing.T
	m      vm.Machine
	k      *kernel
	topo   *topology.Topology
	a      *policy.Allocator
	shared []cgroup.ContainerRef
	procs  map[cgroup.ContainerRef]*proc
	pins   map[policy.Key]cgroup.ContainerRef
	next   int
}

// burstable are the shared Burstable container's limits: half a CPU, 512 shares, 256 MiB.
var burstable = cgroup.Resources{CPUQuota: cgroup.Quota{QuotaUS: 50000, PeriodUS: 100000}, CPUShares: 512, MemoryLimit: 256 << 20}

func (e *e2e) startShared() {
	e.shared = []cgroup.ContainerRef{guestRef(e.t, 400, "Burstable"), guestRef(e.t, 401, "BestEffort")}
	for _, r := range e.shared {
		e.k.addContainer(r)
		e.procs[r] = e.k.start(2, "busy", e.k.dirs(r)...)
	}
	e.applyShared()
}

// applyShared writes the allocator's shared pool to the shared containers and checks their
// threads.
func (e *e2e) applyShared() {
	e.t.Helper()
	pool := e.a.SharedCPUs()
	if want := e.k.online.Difference(e.a.ReservedCPUs()).Difference(e.pinned()); !pool.Equals(want) {
		e.t.Errorf("shared pool %s, want every unreserved, unpinned CPU %s", pool, want)
	}
	for i, r := range e.shared {
		want := cgroup.Resources{CPUs: pool, Mems: e.k.mems}
		if i == 0 {
			want.CPUQuota, want.CPUShares, want.MemoryLimit = burstable.CPUQuota, burstable.CPUShares, burstable.MemoryLimit
		}
		if res := e.k.apply(r, want); !res.EffectiveCPUs.Equals(pool) {
			e.t.Errorf("%s effective CPUs %s, want the pool %s", r, res.EffectiveCPUs, pool)
		}
	}
	for _, r := range e.shared {
		e.k.verify(e.procs[r], pool, e.k.mems)
	}
}

func (e *e2e) pinned() cpuset.CPUSet {
	all := cpuset.New()
	for _, asg := range e.a.Assignments() {
		all = all.Union(asg.CPUs)
	}
	return all
}

// admit allocates one whole core on NUMA node id for a new worker, narrows the shared pool, pins
// the worker's cgroup and starts the worker in it — the agent's order on the NRI path, where the
// cpuset is in the container's spec before runc starts it: no shared thread ever runs on the
// worker's core and the worker never runs or allocates elsewhere.
func (e *e2e) admit(id int, name string) {
	e.t.Helper()
	key := policy.Key{PodUID: fmt.Sprintf("e2e-%d", e.next), Container: name}
	asg, err := e.a.Allocate(policy.Request{Key: key, CPUs: e.topo.ThreadsPerCore(), NUMANode: policy.OnNUMANode(topology.NUMAID(id))})
	if err != nil {
		e.t.Fatalf("allocate a core on node %d: %v", id, err)
	}
	if !asg.CPUs.IsSubsetOf(e.m.NodeCPUs(id)) || !asg.Mems.Equals(cpuset.New(id)) || !slices.ContainsFunc(e.m.Cores(), asg.CPUs.Equals) {
		e.t.Errorf("allocation on node %d: CPUs %s mems %s; want one whole core of the node's %s and mems %d",
			id, asg.CPUs, asg.Mems, e.m.NodeCPUs(id), id)
	}
	r := guestRef(e.t, 500+e.next, "Guaranteed")
	e.next++
	e.k.addContainer(r)
	e.pins[key] = r
	e.applyShared()
	res := e.k.apply(r, cgroup.Resources{CPUs: asg.CPUs, Mems: asg.Mems})
	if !res.EffectiveCPUs.Equals(asg.CPUs) || !res.EffectiveMems.Equals(asg.Mems) {
		e.t.Errorf("%s effective %s/%s, want %s/%s", key, res.EffectiveCPUs, res.EffectiveMems, asg.CPUs, asg.Mems)
	}
	e.procs[r] = e.k.startInCgroup(2, "busy", r)
	e.k.verify(e.procs[r], asg.CPUs, asg.Mems)
}

// release ends a worker: its container goes, the allocator frees its core, the pool grows.
func (e *e2e) release(name string) {
	e.t.Helper()
	for key, r := range e.pins {
		if key.Container != name {
			continue
		}
		e.k.kill9(e.procs[r])
		e.k.removeContainer(r)
		if _, ok := e.a.Release(key); !ok {
			e.t.Fatalf("release %s: the allocator did not hold it", key)
		}
		delete(e.pins, key)
		e.applyShared()
		return
	}
	e.t.Fatalf("no worker %s to release", name)
}

// refusalsChangeNothing asks for what cannot be had and checks that no cgroup moved.
func (e *e2e) refusalsChangeNothing() {
	e.t.Helper()
	before := e.states()
	var tooLarge *policy.TooLargeError
	tpc := e.topo.ThreadsPerCore()
	all := (e.topo.NumCPUs() + tpc - 1) / tpc * tpc // whole cores, so only the size is wrong
	if _, err := e.a.Allocate(policy.Request{Key: policy.Key{PodUID: "e2e-big", Container: "rank"}, CPUs: all}); !errors.As(err, &tooLarge) {
		e.t.Errorf("request for every CPU: %v, want a TooLargeError", err)
	}
	for id, n := range e.m.Nodes {
		if n.CPUs != "" {
			continue
		}
		var memOnly *policy.MemoryOnlyNUMANodeError
		_, err := e.a.Allocate(policy.Request{Key: policy.Key{PodUID: "e2e-mem", Container: "rank"}, CPUs: 1, NUMANode: policy.OnNUMANode(topology.NUMAID(id)), AllowSplitCores: true})
		if !errors.As(err, &memOnly) {
			e.t.Errorf("request on memory-only node %d: %v, want a MemoryOnlyNUMANodeError", id, err)
		}
	}
	if after := e.states(); !slices.Equal(before, after) {
		e.t.Errorf("refused requests changed cgroups:\nbefore %v\nafter  %v", before, after)
	}
}

// states summarises every container's cpuset as the kernel reports it.
func (e *e2e) states() []string {
	var out []string
	for r := range e.procs {
		st, err := e.k.fs.Read(r)
		if errors.Is(err, cgroup.ErrVanished) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%s/%s", r, st.EffectiveCPUs, st.EffectiveMems))
	}
	slices.Sort(out)
	return out
}

// checkSharedLimits reads back the Burstable container's quota, shares or weight, memory limit.
func (e *e2e) checkSharedLimits() {
	e.t.Helper()
	st, err := e.k.fs.Read(e.shared[0])
	if err != nil {
		e.t.Fatal(err)
	}
	weightOK := st.CPUShares == burstable.CPUShares
	if e.k.version == cgroup.V2 {
		weightOK = st.CPUWeight == cgroups.ConvertCPUSharesToCgroupV2Value(burstable.CPUShares)
	}
	if st.CPUQuota != burstable.CPUQuota || st.MemoryLimit != burstable.MemoryLimit || !weightOK {
		e.t.Errorf("shared Burstable container reads back quota %+v shares %d weight %d memory %d; want %+v, %d shares, %d bytes",
			st.CPUQuota, st.CPUShares, st.CPUWeight, st.MemoryLimit, burstable.CPUQuota, burstable.CPUShares, burstable.MemoryLimit)
	}
}
