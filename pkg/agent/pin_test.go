package agent

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// TestPinThroughInotify is the fast path: the pod is allocated when first seen, shared containers
// shrink at once, and the worker's cgroup gets the exclusive cpuset and mems as soon as its
// directory appears, named through the runtime.
func TestPinThroughInotify(t *testing.T) {
	e := newEnv(t, envOpts{})
	sys := newPod("system", nil, "250m")
	sys.Status.QOSClass = corev1.PodQOSBurstable
	sysRef := e.container(sys, hexID('1'))
	e.apply(withStatus(sys, hexID('1')))
	e.start()
	if got, _ := e.cpus(sysRef); !got.Equals(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)) {
		t.Fatalf("shared container before any pin = %s, want every CPU", got)
	}

	w := newPod("worker", exclusiveLabel, "2")
	e.apply(w)
	rep := e.a.DrainPods(context.Background())
	if len(rep.Allocated) != 1 || rep.Allocated[0].CPUs.Size() != 2 {
		t.Fatalf("allocated %v, want one entry of 2 CPUs", rep.Allocated)
	}
	pin := rep.Allocated[0]
	if !slices.Contains(rep.Shared, sysRef) {
		t.Errorf("the shared container was not rewritten when the pool shrank: %+v", rep)
	}
	if got, _ := e.cpus(sysRef); got.Intersection(pin.CPUs).Size() != 0 || !got.Equals(sharedOf(e.a)) {
		t.Errorf("shared container = %s, want the shared pool %s without the pin %s", got, sharedOf(e.a), pin.CPUs)
	}
	if evs := e.eventsWith(ReasonPinned); len(evs) != 1 {
		t.Errorf("events %v, want one %s", evs, ReasonPinned)
	}

	sandbox := e.container(w, hexID('a'))
	e.resolver.set(hexID('a'), cri.Identity{PodUID: string(w.UID), Sandbox: true})
	if rep := e.appeared(sandbox); len(rep.Pinned) != 0 || len(rep.Shared) != 1 {
		t.Errorf("sandbox: %+v, want one shared write", rep)
	}
	ctr := e.container(w, hexID('b'))
	e.resolver.set(hexID('b'), cri.Identity{PodUID: string(w.UID), Name: "c0"})
	rep = e.appeared(ctr)
	if len(rep.Pinned) != 1 || rep.Pinned[0] != ctr {
		t.Fatalf("appeared: %+v, want the worker pinned", rep)
	}
	cpus, mems := e.cpus(ctr)
	if !cpus.Equals(pin.CPUs) || !mems.Equals(cpuset.New(int(pin.NUMANode))) {
		t.Errorf("worker cgroup = cpus %s mems %s, want %s and %d", cpus, mems, pin.CPUs, pin.NUMANode)
	}
	if len(e.hooks.pins) != 1 || e.hooks.pins[0] != PathInotify {
		t.Errorf("PinWritten hooks = %v, want one via inotify", e.hooks.pins)
	}
	// The pin moves the pages the worker already holds (cgroup v1 needs the flag for that); the
	// shared pool's values never ask for it.
	for _, call := range e.cg.Calls() {
		if call.Want.MigrateMemory != (call.Ref == ctr) {
			t.Errorf("Apply(%s) MigrateMemory = %t, want it only for the pinned worker", call.Ref, call.Want.MigrateMemory)
		}
	}
	// A second event for the same container (scan after watch) writes nothing.
	if rep := e.appeared(ctr); len(rep.Pinned)+len(rep.Shared) != 0 {
		t.Errorf("duplicate event wrote %+v", rep)
	}
	if e.store.writes == 0 {
		t.Error("no checkpoint written after the allocation")
	}
}

// TestPinThroughInformerOnly: without inotify and without the runtime, the container ID in the
// pod's status is enough.
func TestPinThroughInformerOnly(t *testing.T) {
	e := newEnv(t, envOpts{noResolver: true})
	e.start()
	w := newPod("worker", exclusiveLabel, "1")
	e.apply(w)
	e.a.DrainPods(context.Background())
	ref := e.container(w, hexID('c'))
	// The periodic scan finds the cgroup first but cannot name it: it gets the shared pool.
	rep := e.a.Tick(context.Background())
	if len(rep.Pinned) != 0 || len(rep.Shared) != 1 {
		t.Fatalf("scan before the status: %+v, want one shared write", rep)
	}
	e.apply(withStatus(w, hexID('c')))
	rep = e.a.DrainPods(context.Background())
	if len(rep.Pinned) != 1 {
		t.Fatalf("status: %+v, want the container pinned", rep)
	}
	if cpus, _ := e.cpus(ref); !cpus.Equals(assignmentsOf(e.a)[0].CPUs) {
		t.Errorf("cgroup carries %s, want the pin", cpus)
	}
}

// TestPodsOfOtherNodesIgnored: the handlers filter by node again.
func TestPodsOfOtherNodesIgnored(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	p := newPod("elsewhere", exclusiveLabel, "1")
	p.Spec.NodeName = "node-b"
	e.a.enqueue(p, false)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 0 {
		t.Fatalf("allocated for another node's pod: %+v", rep)
	}
}

// TestUnpinnableContainersStayShared: fractional or missing requests and unknown pods get the
// shared pool, with a clear event where the author asked for more.
func TestUnpinnableContainersStayShared(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	p := newPod("half", exclusiveLabel, "1500m")
	e.apply(p)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 0 {
		t.Fatalf("allocated for a fractional request: %+v", rep)
	}
	if evs := e.eventsWith(classify.ReasonNotPinned); len(evs) != 1 {
		t.Errorf("events = %v, want one %s", evs, classify.ReasonNotPinned)
	}
	ref := e.container(p, hexID('d'))
	e.resolver.set(hexID('d'), cri.Identity{PodUID: string(p.UID), Name: "c0"})
	if rep := e.appeared(ref); len(rep.Pinned) != 0 {
		t.Errorf("fractional container: %+v, want shared", rep)
	}
	if cpus, _ := e.cpus(ref); !cpus.Equals(sharedOf(e.a)) {
		t.Errorf("fractional container = %s, want the shared pool %s", cpus, sharedOf(e.a))
	}
	stranger := newPod("unknown", exclusiveLabel, "1")
	sref := e.container(stranger, hexID('e'))
	if rep := e.appeared(sref); len(rep.Pinned) != 0 {
		t.Errorf("container of an unknown pod: %+v, want shared", rep)
	}
	if cpus, _ := e.cpus(sref); !cpus.Equals(sharedOf(e.a)) {
		t.Errorf("unknown pod's container = %s, want the shared pool", cpus)
	}
	// Nonsense label values: an event, nothing pinned, nothing crashes.
	odd := newPod("odd", map[string]string{classify.LabelPinning: "yes please"}, "1")
	odd.Annotations = map[string]string{classify.AnnotationNUMANode: "-1"}
	e.apply(odd)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 0 {
		t.Errorf("allocated for a nonsense label: %+v", rep)
	}
	if evs := e.eventsWith(classify.ReasonInvalidPinningLabel); len(evs) != 1 {
		t.Errorf("events = %v, want one %s", evs, classify.ReasonInvalidPinningLabel)
	}
}

// TestNUMAHint: the placer's hint decides the node; an author's hint is ignored with an event; a
// hint for a node that cannot hold the request is refused.
func TestNUMAHint(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	placed := newPod("placed", exclusiveLabel, "2")
	placed.Spec.SchedulerName = classify.DefaultPlacerSchedulerName
	placed.Annotations = map[string]string{classify.AnnotationNUMANode: "1"}
	e.apply(placed)
	rep := e.a.DrainPods(context.Background())
	if len(rep.Allocated) != 1 || rep.Allocated[0].NUMANode != 1 {
		t.Fatalf("placer pod allocated %+v, want NUMA node 1", rep.Allocated)
	}
	authored := newPod("authored", exclusiveLabel, "1")
	authored.Annotations = map[string]string{classify.AnnotationNUMANode: "1"}
	e.apply(authored)
	e.a.DrainPods(context.Background())
	if evs := e.eventsWith(classify.ReasonNUMAHintIgnored); len(evs) != 1 {
		t.Errorf("events %v, want one %s", evs, classify.ReasonNUMAHintIgnored)
	}
	bogus := newPod("bogus", exclusiveLabel, "1")
	bogus.Spec.SchedulerName = classify.DefaultPlacerSchedulerName
	bogus.Annotations = map[string]string{classify.AnnotationNUMANode: "7"}
	e.apply(bogus)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 0 {
		t.Errorf("allocated on a NUMA node the machine lacks: %+v", rep.Allocated)
	}
	if evs := e.eventsWith(ReasonPinFailed); len(evs) != 1 {
		t.Errorf("events %v, want one %s", evs, ReasonPinFailed)
	}
}

// TestSharedQuota: shared containers get the configured CPU quota and memory limit.
func TestSharedQuota(t *testing.T) {
	e := newEnv(t, envOpts{modify: func(o *Options) { o.Classify.CPUQuota, o.Classify.MemoryLimit = classify.Request, classify.Limit }})
	e.start()
	p := newPod("svc", nil, "500m")
	p.Status.QOSClass = corev1.PodQOSBurstable
	c := &p.Spec.Containers[0]
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Mi")
	ref := e.container(p, hexID('f'))
	e.apply(withStatus(p, hexID('f')))
	e.a.DrainPods(context.Background())
	s, err := e.cg.Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUQuota != (cgroup.Quota{QuotaUS: 50000, PeriodUS: 100000}) || s.MemoryLimit != 64<<20 {
		t.Errorf("shared container quota %+v memory %d, want 50000/100000 and 64Mi", s.CPUQuota, s.MemoryLimit)
	}
}
