package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// pinned sets up a started agent with one shared container and one pinned worker.
func pinned(t *testing.T, o envOpts) (e *env, w *corev1.Pod, wref, sref cgroup.ContainerRef) {
	e = newEnv(t, o)
	sys := newPod("system", nil, "250m")
	sys.Status.QOSClass = corev1.PodQOSBurstable
	sref = e.container(sys, hexID('1'))
	e.apply(withStatus(sys, hexID('1')))
	e.start()
	w = newPod("worker", exclusiveLabel, "2")
	e.apply(w)
	e.a.DrainPods(context.Background())
	wref = e.container(w, hexID('2'))
	if e.resolver != nil {
		e.resolver.set(hexID('2'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	}
	w = withStatus(w, hexID('2'))
	e.apply(w)
	e.a.DrainPods(context.Background())
	if cpus, _ := e.cpus(wref); cpus.Size() != 2 {
		t.Fatalf("setup: worker carries %s, want 2 exclusive CPUs", cpus)
	}
	return e, w, wref, sref
}

// TestReleaseGrowsSharedPool: deleting the pod returns its CPUs; the shared containers grow.
func TestReleaseGrowsSharedPool(t *testing.T) {
	e, w, _, sref := pinned(t, envOpts{})
	before, _ := e.cpus(sref)
	e.remove(w)
	rep := e.a.DrainPods(context.Background())
	if len(rep.Released) != 1 {
		t.Fatalf("released %v, want the worker's entry", rep.Released)
	}
	after, _ := e.cpus(sref)
	if after.Size() != 8 || before.Size() != 6 {
		t.Errorf("shared container %s before and %s after the release, want 6 then 8 CPUs", before, after)
	}
}

// TestTerminalPodReleases: a finished pod's CPUs come back before the pod is deleted.
func TestTerminalPodReleases(t *testing.T) {
	e, w, _, _ := pinned(t, envOpts{})
	done := w.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	done.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	e.apply(done)
	if rep := e.a.DrainPods(context.Background()); len(rep.Released) != 1 {
		t.Fatalf("released %v, want the finished worker's entry", rep.Released)
	}
	if sharedOf(e.a).Size() != 8 {
		t.Errorf("shared pool %s, want every CPU back", sharedOf(e.a))
	}
}

// TestDriftRepaired: a cpuset rewritten by hand is rewritten at the next tick, and only then.
func TestDriftRepaired(t *testing.T) {
	e, _, wref, sref := pinned(t, envOpts{})
	if rep := e.a.Tick(context.Background()); len(rep.Pinned)+len(rep.Shared)+len(rep.Repaired) != 0 {
		t.Fatalf("a tick without drift wrote %+v", rep)
	}
	want, mems := e.cpus(wref)
	e.cg.Add(wref, cgroup.Resources{CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), Mems: cpuset.New(0, 1)})
	shared, _ := e.cpus(sref)
	e.cg.Add(sref, cgroup.Resources{CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), Mems: cpuset.New(0, 1)})
	rep := e.a.Tick(context.Background())
	if len(rep.Repaired) != 2 || e.hooks.repairs != 2 {
		t.Fatalf("repaired %v (hooks %d), want both containers", rep.Repaired, e.hooks.repairs)
	}
	if got, gotMems := e.cpus(wref); !got.Equals(want) || !gotMems.Equals(mems) {
		t.Errorf("worker after repair = %s/%s, want %s/%s", got, gotMems, want, mems)
	}
	if got, _ := e.cpus(sref); !got.Equals(shared) {
		t.Errorf("shared container after repair = %s, want %s", got, shared)
	}
}

// TestVanishedContainers: a container that exits before its pin, or whose cgroup disappears,
// is dropped with a reason; nothing is lost.
func TestVanishedContainers(t *testing.T) {
	e, w, wref, _ := pinned(t, envOpts{})
	ghost := e.container(w, hexID('3'))
	e.resolver.set(hexID('3'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	e.cg.Remove(ghost)
	rep := e.appeared(ghost)
	if !slices.Contains(rep.Vanished, ghost) || len(rep.Errors) != 0 {
		t.Fatalf("vanished before its pin: %+v, want it dropped without an error", rep)
	}
	e.cg.Remove(wref)
	rep = e.a.Tick(context.Background())
	if !slices.Contains(rep.Vanished, wref) {
		t.Fatalf("tick after the worker's cgroup vanished: %+v", rep)
	}
	if len(assignmentsOf(e.a)) != 1 {
		t.Error("the pod's entry was released because a container cgroup vanished; only the pod's end releases it")
	}
}

// TestNoFitRetried: a worker that does not fit runs shared and is pinned once CPUs come back.
func TestNoFitRetried(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	first := newPod("first", exclusiveLabel, "4")
	second := newPod("second", exclusiveLabel, "4")
	e.apply(first)
	e.a.DrainPods(context.Background())
	e.apply(second)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 0 {
		t.Fatalf("second 4-CPU worker allocated %v, but only 3 CPUs may leave the shared pool", rep.Allocated)
	}
	if evs := e.eventsWith(ReasonPinFailed); len(evs) != 1 || !strings.Contains(evs[0], "shared pool") {
		t.Errorf("events %v, want one %s", evs, ReasonPinFailed)
	}
	e.remove(first)
	rep := e.a.DrainPods(context.Background())
	if len(rep.Released) != 1 || len(rep.Allocated) != 1 || rep.Allocated[0].Key.PodUID != string(second.UID) {
		t.Fatalf("after the first worker left: %+v, want the second allocated", rep)
	}
}

// TestKubeletStaticPolicy: next to a pinning kubelet the agent writes nothing and says why; it
// starts once the kubelet stops pinning.
func TestKubeletStaticPolicy(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.kubelet.policy = "static"
	sys := newPod("system", nil, "250m")
	ref := e.container(sys, hexID('1'))
	e.apply(withStatus(sys, hexID('1')))
	e.a.Tick(context.Background())
	e.a.Tick(context.Background())
	if err := e.a.Ready(); err == nil || !strings.Contains(err.Error(), "static") {
		t.Fatalf("Ready = %v, want a refusal naming the static policy", err)
	}
	if n := len(e.cg.Calls()); n != 0 {
		t.Fatalf("%d cgroup writes next to a static-policy kubelet", n)
	}
	if evs := e.eventsWith(ReasonKubeletStaticPolicy); len(evs) != 1 {
		t.Errorf("node events %v, want exactly one %s", evs, ReasonKubeletStaticPolicy)
	}
	if _, err := e.a.Decide(context.Background(), ContainerRequest{PodUID: string(sys.UID), Container: "c0"}); !errors.Is(err, ErrNotActing) {
		t.Errorf("Decide while refusing = %v", err)
	}
	e.kubelet.policy = "none"
	e.a.Tick(context.Background())
	if err := e.a.Ready(); err != nil {
		t.Fatalf("Ready after the kubelet stopped pinning = %v", err)
	}
	if cpus, _ := e.cpus(ref); !cpus.Equals(sharedOf(e.a)) {
		t.Errorf("container %s after starting, want the shared pool", cpus)
	}
}

// TestCheckpointDiskFull: a failing checkpoint write never stops pinning, and is retried.
func TestCheckpointDiskFull(t *testing.T) {
	store := &memStore{}
	e := newEnv(t, envOpts{store: store})
	e.start()
	store.mu.Lock()
	store.fail = &pathErr{syscall.ENOSPC}
	store.mu.Unlock()
	w := newPod("worker", exclusiveLabel, "1")
	e.apply(w)
	e.a.DrainPods(context.Background())
	ref := e.container(w, hexID('4'))
	e.resolver.set(hexID('4'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	if rep := e.appeared(ref); len(rep.Pinned) != 1 {
		t.Fatalf("pin with a full disk: %+v", rep)
	}
	if e.hooks.failures[ErrCheckpoint] == 0 {
		t.Error("no checkpoint failure counted")
	}
	store.mu.Lock()
	store.fail = nil
	writes := store.writes
	store.mu.Unlock()
	e.a.Tick(context.Background())
	if store.writes != writes+1 {
		t.Errorf("checkpoint writes %d after the disk recovered, want %d", store.writes, writes+1)
	}
	if !strings.Contains(string(store.data), string(w.UID)) {
		t.Error("the recovered checkpoint lacks the worker's entry")
	}
}

type pathErr struct{ errno syscall.Errno }

func (p *pathErr) Error() string {
	return "write /var/lib/finegrain/checkpoint.json.tmp: " + p.errno.Error()
}
func (p *pathErr) Unwrap() error { return p.errno }
