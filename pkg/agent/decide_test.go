package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// TestDecide is the synchronous seam for an NRI plugin: decisions from memory, allocation on
// demand, typed refusals, the name of the container recorded for the cgroup paths.
func TestDecide(t *testing.T) {
	e := newEnv(t, envOpts{noResolver: true})
	e.start()
	ctx := context.Background()
	w := newPod("worker", exclusiveLabel, "2", "500m")
	e.apply(w)
	e.a.DrainPods(ctx)
	id := cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: hexID('6')}
	d, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "c0", ID: id})
	if err != nil || !d.Exclusive || d.Resources.CPUs.Size() != 2 || !d.Resources.Mems.Equals(cpuset.New(int(d.NUMANode))) {
		t.Fatalf("Decide(worker) = %+v, %v", d, err)
	}
	if d.SharedCPUs.Intersection(d.Resources.CPUs).Size() != 0 || d.SharedCPUs.Size() != 6 {
		t.Errorf("shared pool %s next to pin %s", d.SharedCPUs, d.Resources.CPUs)
	}
	side, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "c1"})
	if err != nil || side.Exclusive || !side.Resources.CPUs.Equals(d.SharedCPUs) || side.Resources.CPUQuota.QuotaUS != 50000 {
		t.Errorf("Decide(sidecar) = %+v, %v, want the shared pool with a 500m quota", side, err)
	}
	// The cgroup path names the container from what Decide learnt, without the runtime.
	ref := e.container(w, hexID('6'))
	if rep := e.appeared(ref); len(rep.Pinned) != 1 {
		t.Errorf("cgroup after Decide: %+v, want it pinned", rep)
	}

	if _, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "nope"}); err == nil {
		t.Error("Decide(unknown container) = nil error")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := e.a.Decide(short, ContainerRequest{PodUID: "00000000-0000-4000-8000-999999999999", Container: "c0"}); !errors.Is(err, ErrUnknownPod) {
		t.Errorf("Decide(unknown pod) = %v, want ErrUnknownPod", err)
	}

	huge := newPod("huge", exclusiveLabel, "5")
	e.apply(huge)
	e.a.DrainPods(ctx)
	_, err = e.a.Decide(ctx, ContainerRequest{PodUID: string(huge.UID), Container: "c0"})
	var tooLarge *policy.TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "ns/huge") {
		t.Errorf("Decide(5 CPUs on 4-CPU NUMA nodes) = %v, want a TooLargeError naming the pod", err)
	}

	if rel := e.a.ReleasePod(string(w.UID)); len(rel) != 1 {
		t.Errorf("ReleasePod = %v, want the worker's entry", rel)
	}
}

// TestDecideWaitsForPod: a caller asking before the informer delivered the pod gets the answer
// once it does.
func TestDecideWaitsForPod(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	w := newPod("worker", exclusiveLabel, "1")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "c0"})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	e.apply(w)
	e.a.DrainPods(context.Background())
	if err := <-done; err != nil {
		t.Fatalf("Decide = %v", err)
	}
}

// TestSnapshotAndChanges: the reporting seam sees pins with names, the shared pool and the free
// lists, and is told of changes without blocking the agent.
func TestSnapshotAndChanges(t *testing.T) {
	e, w, wref, _ := pinned(t, envOpts{})
	changes, cancel := e.a.Subscribe()
	defer cancel()
	s := e.a.Snapshot()
	if len(s.Pins) != 1 || s.Pins[0].Namespace != "ns" || s.Pins[0].Pod != "worker" || s.Pins[0].Container != "c0" || !s.Pins[0].Written {
		t.Fatalf("pins %+v", s.Pins)
	}
	free := 0
	for _, f := range s.Free {
		free += f.FreeCPUs.Size()
	}
	if free != s.Shared.Size() || s.Shared.Size() != 6 || !s.Started || !s.APISynced {
		t.Errorf("snapshot shared %s free %d started %v synced %v", s.Shared, free, s.Started, s.APISynced)
	}
	var found bool
	for _, c := range s.Containers {
		if c.Ref == wref {
			found = c.Exclusive && c.Name == "c0" && c.Pod == "worker"
		}
	}
	if !found {
		t.Errorf("containers %+v lack the pinned worker", s.Containers)
	}
	e.a.heartbeat.Store(time.Now().Add(-time.Minute).UnixNano())
	if err := e.a.Healthy(); err == nil {
		t.Error("Healthy = nil with a loop stalled for a minute")
	}
	e.remove(w)
	e.a.DrainPods(context.Background())
	select {
	case <-changes:
	default:
		t.Fatal("no change notification after a release")
	}
	if s2 := e.a.Snapshot(); s2.Generation <= s.Generation || len(s2.Pins) != 0 {
		t.Errorf("generation %d -> %d, pins %v", s.Generation, s2.Generation, s2.Pins)
	}
}

// TestRunLoop runs the real loop: events from the watcher pin, the health endpoints answer.
func TestRunLoop(t *testing.T) {
	watch := &chanWatcher{ch: make(chan cgwatch.Event, 8)}
	e := newEnv(t, envOpts{run: true, modify: func(o *Options) { o.ReconcileInterval = 20 * time.Millisecond }})
	e.a.d.Watcher = watch
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	waitFor(t, func() bool { return e.a.Ready() == nil })
	if err := e.a.Healthy(); err != nil {
		t.Errorf("Healthy = %v", err)
	}
	select {
	case <-e.a.Started():
	default:
		t.Error("Started not closed once ready")
	}
	w := newPod("worker", exclusiveLabel, "1")
	if _, err := e.client.CoreV1().Pods(w.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(assignmentsOf(e.a)) == 1 })
	ref := e.container(w, hexID('7'))
	e.resolver.set(hexID('7'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	watch.ch <- cgwatch.Event{Kind: cgwatch.Appeared, Time: time.Now(),
		Loc: cgroup.Location{Level: cgroup.LevelContainer, QOS: ref.Pod.QOS, Pod: ref.Pod.UID, Container: ref.Container}}
	waitFor(t, func() bool {
		cpus, _ := e.cpus(ref)
		return cpus.Equals(assignmentsOf(e.a)[0].CPUs)
	})
	// Drift is repaired by the loop's ticker.
	e.cg.Add(ref, cgroup.Resources{CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), Mems: cpuset.New(0, 1)})
	waitFor(t, func() bool {
		cpus, _ := e.cpus(ref)
		return cpus.Size() == 1
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
