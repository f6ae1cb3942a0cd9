package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// windowHooks records each first pin with its path and window.
type windowHooks struct {
	NopHooks
	mu      sync.Mutex
	paths   []Path
	windows []time.Duration
}

func (h *windowHooks) PinWritten(p Path, w time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paths = append(h.paths, p)
	h.windows = append(h.windows, w)
}

// TestDecidedContainerCountsAsPinnedAtCreation: a container the runtime created with the pin
// Decide returned is accounted to PathDecide with a zero window and is not rewritten; one whose
// cgroup does not carry it (the adjustment was lost) is pinned by the agent and keeps a window.
func TestDecidedContainerCountsAsPinnedAtCreation(t *testing.T) {
	hooks := &windowHooks{}
	e := newEnv(t, envOpts{noResolver: true, modify: func(o *Options) { o.Hooks = hooks; o.SyncDecisions = true }})
	e.start()
	ctx := context.Background()
	if paths := e.a.Snapshot().Paths; len(paths) == 0 || paths[0] != PathDecide {
		t.Errorf("snapshot paths %v, want %s first", paths, PathDecide)
	}
	w := newPod("worker", exclusiveLabel, "1", "1")
	e.apply(w)
	e.a.DrainPods(ctx)

	good := cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: hexID('a')}
	d, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "c0", ID: good})
	if err != nil || !d.Exclusive {
		t.Fatalf("Decide(c0) = %+v, %v", d, err)
	}
	ref := e.container(w, good.ID)
	e.cg.Add(ref, cgroup.Resources{CPUs: d.Resources.CPUs, Mems: d.Resources.Mems})
	rep := e.a.Tick(ctx)
	for _, p := range rep.Pinned {
		if p == ref {
			t.Errorf("a container created with its pin was rewritten: %+v", rep)
		}
	}

	lost := cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: hexID('b')}
	d2, err := e.a.Decide(ctx, ContainerRequest{PodUID: string(w.UID), Container: "c1", ID: lost})
	if err != nil || !d2.Exclusive {
		t.Fatalf("Decide(c1) = %+v, %v", d2, err)
	}
	ref2 := e.container(w, lost.ID)
	rep = e.a.Tick(ctx)
	if len(rep.Pinned) != 1 || rep.Pinned[0] != ref2 {
		t.Errorf("pinned %v, want the container created without its pin", rep.Pinned)
	}
	if got, _ := e.cpus(ref2); !got.Equals(d2.Resources.CPUs) {
		t.Errorf("container created without its pin carries %s, want %s", got, d2.Resources.CPUs)
	}

	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if len(hooks.paths) != 2 || hooks.paths[0] != PathDecide || hooks.paths[1] != PathDecide {
		t.Fatalf("pins reported on paths %v, want two on %s", hooks.paths, PathDecide)
	}
	if hooks.windows[0] != 0 {
		t.Errorf("window of a container created pinned = %s, want 0", hooks.windows[0])
	}
}

// TestDecideUnknownPod: a pod the agent does not know gets the shared pool when the caller
// accepts it, the unknown-pod error otherwise, and its checkpoint entry when the agent started
// without the API server.
func TestDecideUnknownPod(t *testing.T) {
	e := newEnv(t, envOpts{noResolver: true})
	e.start()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	uid := "00000000-0000-4000-8000-777777777777"
	d, err := e.a.Decide(expired, ContainerRequest{PodUID: uid, Container: "c0", SharedIfUnknown: true})
	if err != nil || d.Exclusive || !d.Resources.CPUs.Equals(d.SharedCPUs) || d.SharedCPUs.Size() != 8 {
		t.Errorf("Decide(unknown, shared accepted) = %+v, %v; want the shared pool", d, err)
	}
	if _, err := e.a.Decide(expired, ContainerRequest{PodUID: uid, Container: "c0"}); !errors.Is(err, ErrUnknownPod) {
		t.Errorf("Decide(unknown) = %v, want ErrUnknownPod", err)
	}

	// A worker pinned before a restart during an API outage keeps its CPUs through Decide.
	old, w, wref, _ := pinned(t, envOpts{})
	want, _ := old.cpus(wref)
	r := restarted(t, old, nil, func(c *fake.Clientset) {
		c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
	})
	r.start()
	// It answers at once, without waiting for a pod list that cannot come.
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	start := time.Now()
	d, err = r.a.Decide(long, ContainerRequest{PodUID: string(w.UID), Container: "c0"})
	if err != nil || !d.Exclusive || !d.Resources.CPUs.Equals(want) {
		t.Errorf("Decide(restarted container during an outage) = %+v, %v; want its checkpoint entry %s", d, err, want)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Decide waited %s for a pod whose entry it holds", took)
	}
}
