package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// restarted builds a second agent on the same cgroups and checkpoint, as after a kill -9.
func restarted(t *testing.T, old *env, pods []*corev1.Pod, client func(*fake.Clientset)) *env {
	t.Helper()
	e := newEnv(t, envOpts{store: old.store, cg: old.cg, objects: pods, client: client,
		modify: func(o *Options) { o.StartupAPITimeout = 300 * time.Millisecond }})
	for id, ident := range old.resolver.ids {
		e.resolver.set(id, ident)
	}
	return e
}

// writesTo counts the writes that changed a container's cgroup after the first skip calls.
func writesTo(e *env, ref cgroup.ContainerRef, skip int) int {
	n := 0
	for _, c := range e.cg.Calls()[skip:] {
		if c.Ref == ref && len(c.Result.Changes) > 0 {
			n++
		}
	}
	return n
}

// TestRestartKeepsPins: a new agent rebuilds the same entries and rewrites nothing.
func TestRestartKeepsPins(t *testing.T) {
	old, w, wref, _ := pinned(t, envOpts{})
	want := assignmentsOf(old.a)
	e := restarted(t, old, []*corev1.Pod{w}, nil)
	before := len(e.cg.Calls())
	e.start()
	if got := assignmentsOf(e.a); len(got) != 1 || !got[0].CPUs.Equals(want[0].CPUs) {
		t.Fatalf("entries after restart %v, want %v", got, want)
	}
	if n := writesTo(e, wref, before); n != 0 {
		t.Errorf("restart rewrote the pinned worker %d times", n)
	}
}

// TestRestartWithoutCheckpoint: a lost checkpoint is rebuilt from what the cgroups carry.
func TestRestartWithoutCheckpoint(t *testing.T) {
	for _, name := range []string{"absent", "corrupt"} {
		t.Run(name, func(t *testing.T) {
			old, w, wref, _ := pinned(t, envOpts{})
			want, _ := old.cpus(wref)
			if name == "absent" {
				old.store.data = nil
			} else {
				old.store.data = []byte(`{"version":1,"checksum":"sha256:00","payload":{}}`)
			}
			e := restarted(t, old, []*corev1.Pod{w}, nil)
			before := len(e.cg.Calls())
			e.start()
			got := assignmentsOf(e.a)
			if len(got) != 1 || !got[0].CPUs.Equals(want) {
				t.Fatalf("entries %v, want the cgroup's pin %s adopted", got, want)
			}
			if writesTo(e, wref, before) != 0 {
				t.Error("the adopted pin was rewritten")
			}
		})
	}
}

// TestRestartDuringAPIOutage: without the pod list the checkpoint is trusted, nothing pinned is
// unpinned, and when the list arrives the entries of deleted pods are dropped.
func TestRestartDuringAPIOutage(t *testing.T) {
	old, w, wref, _ := pinned(t, envOpts{})
	want, _ := old.cpus(wref)
	e := restarted(t, old, nil, func(c *fake.Clientset) {
		c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
	})
	e.start()
	if err := e.a.Ready(); err != nil {
		t.Fatalf("not enforcing without the API server: %v", err)
	}
	if got := assignmentsOf(e.a); len(got) != 1 || !got[0].CPUs.Equals(want) {
		t.Fatalf("entries %v during the outage, want the checkpoint's", got)
	}
	if cpus, _ := e.cpus(wref); !cpus.Equals(want) {
		t.Fatalf("worker unpinned during the outage: %s", cpus)
	}
	if e.a.Snapshot().APISynced {
		t.Error("snapshot claims the pod list was read")
	}
	// The pod list arrives without the worker (deleted meanwhile).
	e.a.queue.push(podEvent{resync: true})
	rep := e.a.DrainPods(context.Background())
	if len(rep.Released) != 1 || rep.Released[0].Key.PodUID != string(w.UID) {
		t.Fatalf("resync released %v, want the deleted worker's entry", rep.Released)
	}
}

// TestRestartRepairsDisagreement: a checkpoint entry whose cgroup carries something else is
// rewritten, and a worker the checkpoint missed (killed between allocation and checkpoint) is
// allocated.
func TestRestartRepairsDisagreement(t *testing.T) {
	old, w, wref, _ := pinned(t, envOpts{})
	want, mems := old.cpus(wref)
	old.cg.Add(wref, cgroup.Resources{CPUs: want.Union(old.a.Snapshot().Shared), Mems: mems})
	late := newPod("late", exclusiveLabel, "1")
	lref := old.container(late, hexID('5'))
	old.resolver.set(hexID('5'), cri.Identity{PodUID: string(late.UID), Name: "c0"})
	e := restarted(t, old, []*corev1.Pod{w, withStatus(late, hexID('5'))}, nil)
	rec := &repairHooks{countingHooks: e.hooks}
	e.a.hooks = rec
	e.start()
	if got, _ := e.cpus(wref); !got.Equals(want) {
		t.Errorf("worker after restart = %s, want its checkpoint entry %s", got, want)
	}
	if got, _ := e.cpus(lref); got.Size() != 1 || got.Intersection(want).Size() != 0 {
		t.Errorf("late worker = %s, want one CPU of its own", got)
	}
	reasons := map[policy.RepairReason]bool{}
	for _, r := range rec.repairs {
		reasons[r.Reason] = true
	}
	if !reasons[policy.ReasonCgroupDisagrees] || !reasons[policy.ReasonNotPinned] {
		t.Errorf("repairs %v, want CgroupDisagrees and NotPinned", rec.repairs)
	}
}

type repairHooks struct {
	*countingHooks
	repairs []policy.Repair
}

func (h *repairHooks) Reconciled(r policy.Repair) { h.repairs = append(h.repairs, r) }

// Finding 5 of issue 21: an agent restarted while the API server is down, with a checkpoint it
// cannot use (absent, truncated, bad checksum), started with no entries and widened the pinned
// worker (0-1 → 0-7) until the pod list came back. The cgroups still say who is pinned: it adopts
// those pins, under the container's name when the runtime names it and under its container ID
// when nothing does, writes nothing that widens them, keeps their CPUs out of the shared pool,
// and when the pod list arrives the entry is the named container's, on the same CPUs.
func TestRestartDuringAPIOutageWithoutCheckpoint(t *testing.T) {
	for _, cp := range []string{"absent", "truncated", "bad checksum"} {
		for _, named := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, named by the runtime %v", cp, named), func(t *testing.T) {
				var down atomic.Bool
				down.Store(true)
				outage := func(c *fake.Clientset) {
					c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
						if down.Load() {
							return true, nil, errors.New("connection refused")
						}
						return false, nil, nil
					})
				}
				old, w, wref, sref := pinned(t, envOpts{})
				want, wantMems := old.cpus(wref)
				shared, _ := old.cpus(sref)
				switch cp {
				case "absent":
					old.store.data = nil
				case "truncated":
					old.store.data = old.store.data[:len(old.store.data)/2]
				default:
					old.store.data = bytes.Replace(old.store.data, []byte(`"sha256:`), []byte(`"sha256:0`), 1)
				}
				e := newEnv(t, envOpts{store: old.store, cg: old.cg, client: outage, noResolver: !named,
					modify: func(o *Options) { o.StartupAPITimeout = 300 * time.Millisecond }})
				if named {
					for id, ident := range old.resolver.ids {
						e.resolver.set(id, ident)
					}
				}
				before := len(e.cg.Calls())
				e.start()
				if got, mems := e.cpus(wref); !got.Equals(want) || !mems.Equals(wantMems) {
					t.Fatalf("worker carries cpus %s mems %s during the outage, want its pin %s mems %s", got, mems, want, wantMems)
				}
				if n := writesTo(e, wref, before); n != 0 {
					t.Errorf("the pinned worker was written %d times", n)
				}
				if got := sharedOf(e.a); got.Intersection(want).Size() != 0 || !got.Equals(shared) {
					t.Errorf("shared pool %s during the outage, want %s as before (without the pin %s)", got, shared, want)
				}
				asgs := assignmentsOf(e.a)
				if len(asgs) != 1 || !asgs[0].CPUs.Equals(want) {
					t.Fatalf("entries %v, want the worker's pin adopted", asgs)
				}
				// The API server answers; the pod list arrives with the worker: its entry is the
				// named container's, unchanged.
				down.Store(false)
				e.apply(w)
				e.a.queue.push(podEvent{resync: true})
				rep := e.a.DrainPods(context.Background())
				if len(rep.Released) != 0 || len(rep.Allocated) != 0 {
					t.Errorf("the pod list moved the pin: released %v, allocated %v", rep.Released, rep.Allocated)
				}
				asgs = assignmentsOf(e.a)
				if len(asgs) != 1 || asgs[0].Key != (policy.Key{PodUID: string(w.UID), Container: "c0"}) || !asgs[0].CPUs.Equals(want) {
					t.Errorf("entries %v after the pod list, want container c0's on %s", asgs, want)
				}
				if got, _ := e.cpus(wref); !got.Equals(want) {
					t.Errorf("worker carries %s after the pod list, want %s", got, want)
				}
			})
		}
	}
}
