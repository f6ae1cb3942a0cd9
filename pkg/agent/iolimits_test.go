package agent

import (
	"context"
	"errors"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// fakeObjectives is an ObjectiveSource whose limits the test sets by pod name.
type fakeObjectives struct {
	mu     sync.Mutex
	gen    uint64
	synced bool
	bps    map[string]uint64
	err    error
	asked  int
}

func (f *fakeObjectives) Run(ctx context.Context)  { <-ctx.Done() }
func (f *fakeObjectives) Changed() <-chan struct{} { return nil }
func (f *fakeObjectives) Generation() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, f.synced
}
func (f *fakeObjectives) PodIOBandwidth(_ context.Context, p *corev1.Pod) (uint64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.err != nil {
		return 0, "", f.err
	}
	if b, ok := f.bps[p.Name]; ok {
		return b, p.Namespace + "/so-" + p.Name, nil
	}
	return 0, "", nil
}

func (f *fakeObjectives) set(name string, bps uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
	f.gen++
	if bps == 0 {
		delete(f.bps, name)
	} else {
		f.bps[name] = bps
	}
}

// fakeIO holds each pod's limit on the devices like the kernel's throttle files would.
type fakeIO struct {
	mu    sync.Mutex
	have  map[cgroup.PodUID]cgroup.IOLimit
	calls []ioCall
	fail  error
}

type ioCall struct {
	pod  cgroup.PodRef
	ctrs int
	devs []cgroup.Device
	want cgroup.IOLimit
}

func (f *fakeIO) ApplyIO(pod cgroup.PodRef, ctrs []cgroup.ContainerID, devs []cgroup.Device, want cgroup.IOLimit) (cgroup.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ioCall{pod, len(ctrs), devs, want})
	if f.fail != nil {
		return cgroup.Result{}, f.fail
	}
	if f.have[pod.UID] == want {
		return cgroup.Result{}, nil
	}
	f.have[pod.UID] = want
	return cgroup.Result{Changes: []cgroup.Write{{File: "io.max", New: "changed"}}}, nil
}

func (f *fakeIO) ncalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

var ioDisk = []cgroup.Device{{Major: 254, Minor: 0}}

func newIOEnv(t *testing.T, objs *fakeObjectives, fio *fakeIO, pods ...*corev1.Pod) *env {
	e := newEnv(t, envOpts{objects: pods, io: fio, ioDevices: ioDisk, objectives: objs})
	e.start()
	return e
}

// TestIOLimitsFollowObjectives: the agent writes nothing until the objectives are listed, then
// gives a held pod its objective's bandwidth both ways on the node's disks (with an event),
// leaves it alone while nothing changes, re-checks it at a full resync, repairs drift, and
// clears the limit (with an event) when the objective lets the pod go.
func TestIOLimitsFollowObjectives(t *testing.T) {
	objs := &fakeObjectives{bps: map[string]uint64{}}
	fio := &fakeIO{have: map[cgroup.PodUID]cgroup.IOLimit{}}
	web := withStatus(newPod("web", nil, "500m"), hexID('a'))
	free := withStatus(newPod("free", nil, "500m"), hexID('b'))
	e := newIOEnv(t, objs, fio, web, free)
	e.container(web, hexID('a'))
	e.a.Tick(context.Background())
	ctx := context.Background()

	if rep := e.a.enforceIO(ctx, true); fio.ncalls() != 0 || len(rep.Limited) != 0 {
		t.Fatalf("before the objectives are listed: %d writes, %+v; want none", fio.ncalls(), rep)
	}

	objs.set("web", 10_000_000)
	rep := e.a.enforceIO(ctx, false)
	if len(rep.Limited) != 1 || rep.Limited[0] != "ns/web" || len(rep.Errors) != 0 {
		t.Fatalf("report %+v, want ns/web limited", rep)
	}
	want := cgroup.IOLimit{ReadBPS: 10_000_000, WriteBPS: 10_000_000}
	if got := fio.have[cgroup.PodUID(web.UID)]; got != want {
		t.Errorf("web carries %+v, want %+v", got, want)
	}
	for _, c := range fio.calls {
		if c.pod.UID == cgroup.PodUID(web.UID) && (c.ctrs != 1 || len(c.devs) != 1 || c.devs[0] != ioDisk[0] || c.pod.QOS != cgroup.Guaranteed) {
			t.Errorf("web's write %+v, want its one container on %v", c, ioDisk)
		}
	}
	if evs := e.eventsWith(ReasonIOLimited); len(evs) != 1 {
		t.Errorf("events %v, want one %s", evs, ReasonIOLimited)
	}

	n := fio.ncalls()
	if rep := e.a.enforceIO(ctx, false); fio.ncalls() != n || len(rep.Limited)+len(rep.Repaired) != 0 {
		t.Errorf("nothing changed: %d more writes, %+v; want none", fio.ncalls()-n, rep)
	}
	asked := objs.asked
	if rep := e.a.enforceIO(ctx, true); fio.ncalls() != n+2 || objs.asked != asked+2 || len(rep.Repaired) != 0 {
		t.Errorf("full resync: %d writes, %d lookups, %+v; want both pods re-checked, nothing repaired", fio.ncalls()-n, objs.asked-asked, rep)
	}

	fio.mu.Lock()
	fio.have[cgroup.PodUID(web.UID)] = cgroup.IOLimit{ReadBPS: 1}
	fio.mu.Unlock()
	if rep := e.a.enforceIO(ctx, true); len(rep.Repaired) != 1 || e.hooks.failures[ErrIOLimit] != 0 {
		t.Errorf("drift: %+v, want ns/web repaired", rep)
	}

	objs.set("web", 0)
	rep = e.a.enforceIO(ctx, false)
	if len(rep.Cleared) != 1 || fio.have[cgroup.PodUID(web.UID)] != (cgroup.IOLimit{}) {
		t.Errorf("objective gone: %+v, web carries %+v; want it cleared", rep, fio.have[cgroup.PodUID(web.UID)])
	}
	if evs := e.eventsWith(ReasonIOLimitCleared); len(evs) != 1 {
		t.Errorf("events %v, want one %s", evs, ReasonIOLimitCleared)
	}
}

// TestIOLimitsRestartAndErrors: a restarted agent (no memory) re-applies every pod once, writing
// only where the cgroups differ; a failing write is counted, reported once, and retried at each
// full resync, not at every tick.
func TestIOLimitsRestartAndErrors(t *testing.T) {
	objs := &fakeObjectives{bps: map[string]uint64{"web": 5_000_000}, synced: true, gen: 1}
	fio := &fakeIO{have: map[cgroup.PodUID]cgroup.IOLimit{}}
	web := withStatus(newPod("web", nil, "500m"), hexID('a'))
	fio.have[cgroup.PodUID(web.UID)] = cgroup.IOLimit{ReadBPS: 5_000_000, WriteBPS: 5_000_000}
	e := newIOEnv(t, objs, fio, web)
	ctx := context.Background()
	if rep := e.a.enforceIO(ctx, false); fio.ncalls() != 1 || len(rep.Limited)+len(rep.Repaired)+len(rep.Cleared) != 0 {
		t.Errorf("after a restart with the limit in place: %d writes, %+v; want one check and no change", fio.ncalls(), rep)
	}

	fio.fail = errors.New("write io.max: no such device")
	objs.set("web", 6_000_000)
	if rep := e.a.enforceIO(ctx, false); len(rep.Errors) != 1 {
		t.Fatalf("%+v, want the error", rep)
	}
	n := fio.ncalls()
	if rep := e.a.enforceIO(ctx, false); len(rep.Errors) != 0 || fio.ncalls() != n {
		t.Errorf("the tick after a failed write: %+v, %d writes; want it left to the full resync", rep, fio.ncalls()-n)
	}
	for i := 0; i < 2; i++ {
		if rep := e.a.enforceIO(ctx, true); len(rep.Errors) != 1 {
			t.Fatalf("full resync %d: %+v, want the error again", i, rep)
		}
	}
	if got := e.hooks.failures[ErrIOLimit]; got != 3 {
		t.Errorf("%d failures counted, want 3", got)
	}
	if evs := e.eventsWith(ReasonIOLimitFailed); len(evs) != 1 {
		t.Errorf("events %v, want one %s for three identical failures", evs, ReasonIOLimitFailed)
	}
	fio.fail = nil
	if rep := e.a.enforceIO(ctx, true); len(rep.Limited) != 1 {
		t.Errorf("after the failure ends: %+v, want ns/web limited", rep)
	}
}
