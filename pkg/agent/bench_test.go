package agent

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// BenchmarkPinOnAppear is the agent's own share of the fast path: an inotify event for a new
// worker container, its name from the runtime (a map here), the decision and the write (to the
// recording fake; the kernel's share is in pkg/cgroup's Apply benchmark).
func BenchmarkPinOnAppear(b *testing.B) {
	e := newEnv(b, envOpts{})
	e.start()
	w := newPod("worker", exclusiveLabel, "1")
	e.apply(w)
	e.a.DrainPods(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("%064x", i)
		ref := cgroup.ContainerRef{Pod: cgroup.PodRef{UID: cgroup.PodUID(w.UID), QOS: cgroup.Guaranteed},
			Container: cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: id}}
		e.cg.Add(ref, cgroup.Resources{})
		e.resolver.set(id, cri.Identity{PodUID: string(w.UID), Name: "c0"})
		if rep := e.appeared(ref); len(rep.Pinned) != 1 {
			b.Fatalf("not pinned: %+v", rep)
		}
		b.StopTimer()
		e.cg.Remove(ref)
		e.a.CgroupEvent(context.Background(), vanished(ref))
		b.StartTimer()
	}
}

// BenchmarkIdleTick is one drift check over 100 shared containers that need nothing: what the
// agent spends every ReconcileInterval on an idle node besides reading the cgroups (the listing
// is precomputed; every 20th tick re-applies every container to the fake).
func BenchmarkIdleTick(b *testing.B) {
	e := newEnv(b, envOpts{})
	for i := range 100 {
		p := newPod(fmt.Sprintf("svc-%d", i), nil, "100m")
		p.Status.QOSClass = corev1.PodQOSBurstable
		e.container(p, fmt.Sprintf("%064x", i))
	}
	e.start()
	list, err := e.cg.Enumerate()
	if err != nil {
		b.Fatal(err)
	}
	e.a.d.Writer = listed{Writer: e.cg, list: list}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if rep := e.a.Tick(context.Background()); len(rep.Shared)+len(rep.Pinned) != 0 {
			b.Fatalf("an idle tick wrote: %+v", rep)
		}
	}
}

// listed is a cgroup writer whose listing is fixed, so a benchmark measures the agent alone.
type listed struct {
	cgroup.Writer
	list []cgroup.Container
}

func (l listed) Enumerate() ([]cgroup.Container, error) { return l.list, nil }

// BenchmarkConfinePass is one pass of ConfineSlurmJobs on a node running a virtual cluster's
// slurmd (its daemons) and one job of 32 processes already in its pinned placeholder: the steady
// state the agent pays every --slurm-confine-interval (100 ms) for new steps to start promptly
// (fake process tables: the agent's own work, not /proc's).
func BenchmarkConfinePass(b *testing.B) {
	host := &fakeHost{procs: map[int]slurm.Process{}, in: map[int]cgroup.ContainerRef{}}
	e := newEnv(b, envOpts{procs: host})
	e.a.d.Mover, e.a.d.SlurmProcesses = host, host.read
	e.start()
	slurmd := slurmdOf("vc1-slurmd-node-a", "ns", vcOwner("vc1", vcUID, true))
	job := placeholderOf("vc1-slurm-42-0", 42, vcOwner("vc1", vcUID, false))
	refs := e.runPods(slurmd, job)
	host.add(refs[slurmd.Name], slurm.Process{PID: 1, Comm: "mpi-entrypoint"}, slurm.Process{PID: 2, PPID: 1, Comm: "munged"},
		slurm.Process{PID: 3, PPID: 1, Comm: "slurmd"}, slurm.Process{PID: 4, PPID: 1, Comm: "sshd"})
	host.add(refs[job.Name], slurm.Process{PID: 10, PPID: 1, Comm: "slurmstepd", Title: "slurmstepd: [42.batch]"})
	for pid := 11; pid < 42; pid++ {
		host.add(refs[job.Name], slurm.Process{PID: pid, PPID: 10, Comm: "rank", Title: "./rank"})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if res := e.a.ConfineSlurmJobs(); len(res.Moved) != 0 || len(res.Errors) != 0 {
			b.Fatalf("a steady pass moved %v, errors %v", res.Moved, res.Errors)
		}
	}
}
