package report

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// fakeSource is a Source whose state the test sets; set notifies without blocking, like the agent.
type fakeSource struct {
	mu      sync.Mutex
	snap    Snapshot
	changed chan struct{}
}

func newFakeSource(s Snapshot) *fakeSource {
	return &fakeSource{snap: s, changed: make(chan struct{}, 1)}
}

func (f *fakeSource) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeSource) Changed() <-chan struct{} { return f.changed }

func (f *fakeSource) set(s Snapshot) {
	f.mu.Lock()
	f.snap = s
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// apiServer is the fake dynamic client plus a record of every apply: the object, the options,
// and an error to return for the next applies.
type apiServer struct {
	client *dynamicfake.FakeDynamicClient

	mu      sync.Mutex
	applies []clienttesting.PatchActionImpl
	stored  *unstructured.Unstructured
	fail    []error
}

func newAPIServer(t *testing.T, withNode bool) *apiServer {
	t.Helper()
	var objs []runtime.Object
	if withNode {
		objs = append(objs, nodeObject())
	}
	s := &apiServer{client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource: "NodeResourceTopologyList",
		nodesResource:            "NodeList",
	}, objs...)}
	s.client.PrependReactor("patch", nrt.Resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.applies = append(s.applies, p)
		if len(s.fail) > 0 {
			err := s.fail[0]
			s.fail = s.fail[1:]
			return true, nil, err
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(p.GetPatch(), &u.Object); err != nil {
			return true, nil, err
		}
		s.stored = u
		return true, u, nil
	})
	return s
}

func nodeObject() *unstructured.Unstructured {
	n := &unstructured.Unstructured{}
	n.SetAPIVersion("v1")
	n.SetKind("Node")
	n.SetName(testNode.Name)
	n.SetUID(types.UID(testNode.UID))
	return n
}

func (s *apiServer) failNext(errs ...error) {
	s.mu.Lock()
	s.fail = append(s.fail, errs...)
	s.mu.Unlock()
}

func (s *apiServer) state() (applies int, stored *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applies), s.stored
}

func (s *apiServer) generation() string {
	_, u := s.state()
	if u == nil {
		return ""
	}
	o, err := nrt.FromUnstructured(u)
	if err != nil {
		return err.Error()
	}
	g, _ := nrt.AttributeValue(o.Attributes, nrt.AttrGeneration)
	return g
}

// recorder is an Observer counting what it is told.
type recorder struct {
	mu          sync.Mutex
	generations []uint64
	failures    int
}

func (r *recorder) Published(g uint64, _ time.Duration) {
	r.mu.Lock()
	r.generations = append(r.generations, g)
	r.mu.Unlock()
}

func (r *recorder) PublishFailed() { r.mu.Lock(); r.failures++; r.mu.Unlock() }

func (r *recorder) counts() (published, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.generations), r.failures
}

// harness runs a Publisher until the test ends.
type harness struct {
	api  *apiServer
	src  *fakeSource
	obs  *recorder
	pub  *Publisher
	done chan error
}

func startPublisher(t *testing.T, withNode bool, resync time.Duration) *harness {
	t.Helper()
	topo := twoSocketSMT(t)
	h := &harness{api: newAPIServer(t, withNode), src: newFakeSource(SnapshotOf(pinnedAllocator(t, topo), 1, names)), obs: &recorder{}, done: make(chan error, 1)}
	var err error
	h.pub, err = NewPublisher(PublisherConfig{
		Client: h.api.client, NodeName: testNode.Name, Topology: topo, Source: h.src,
		Options: Options{WholeCores: true}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: h.obs, MinInterval: time.Millisecond, Resync: resync, MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- h.pub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil && err != context.Canceled {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return h
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPublisherAppliesBuiltObjectWithFieldManagerAndOwner(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "the first apply", func() bool { n, _ := h.api.state(); return n >= 1 })

	h.api.mu.Lock()
	a := h.api.applies[0]
	h.api.mu.Unlock()
	if a.GetPatchType() != types.ApplyPatchType || a.PatchOptions.FieldManager != FieldManager || a.PatchOptions.Force == nil || !*a.PatchOptions.Force {
		t.Errorf("apply used patch type %s, field manager %q, force %v; want server-side apply as %s with force", a.GetPatchType(), a.PatchOptions.FieldManager, a.PatchOptions.Force, FieldManager)
	}
	if a.GetName() != testNode.Name || a.GetNamespace() != "" {
		t.Errorf("applied %s/%s, want the cluster-scoped object %s", a.GetNamespace(), a.GetName(), testNode.Name)
	}
	want, err := Build(testNode, h.pub.cfg.Topology, h.src.Snapshot(), Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	wantU, _ := nrt.ToUnstructured(want)
	var got map[string]any
	if err := json.Unmarshal(a.GetPatch(), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(wantU.Object)
	var wantMap map[string]any
	_ = json.Unmarshal(wantJSON, &wantMap)
	if d := cmp.Diff(wantMap, got); d != "" {
		t.Errorf("applied body differs from Build's object (-want +got):\n%s", d)
	}
	if st := h.pub.Status(); st.Generation != 1 || st.At.IsZero() || st.Error != "" {
		t.Errorf("status after the first apply = %+v, want generation 1, a time and no error", st)
	}
}

func TestPublisherFollowsChangesAndCoalescesBursts(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "generation 1", func() bool { return h.api.generation() == "1" })
	before, _ := h.api.state()

	topo := h.pub.cfg.Topology
	a := pinnedAllocator(t, topo)
	const burst = 200
	for g := uint64(2); g < 2+burst; g++ {
		h.src.set(SnapshotOf(a, g, names))
	}
	final := SnapshotOf(a, 2+burst, names)
	if _, ok := a.Release(policy.Key{PodUID: "uid-lammps", Container: "rank"}); !ok {
		t.Fatal("release failed")
	}
	final = SnapshotOf(a, final.Generation, names)
	h.src.set(final)

	eventually(t, "the last generation", func() bool { return h.api.generation() == "202" })
	after, stored := h.api.state()
	if n := after - before; n >= burst/2 {
		t.Errorf("%d changes took %d applies; notifications should coalesce", burst+1, n)
	}
	o, err := nrt.FromUnstructured(stored)
	if err != nil {
		t.Fatal(err)
	}
	if pins, _ := nrt.AttributeValue(o.Zones[0].Attributes, nrt.AttrPins); pins != "" {
		t.Errorf("node-0 pins after the release = %q, want none", pins)
	}
	if free, _ := nrt.AttributeValue(o.Zones[0].Attributes, nrt.AttrFreeCPUs); free != "1-3,9-11" {
		t.Errorf("node-0 free CPUs after the release = %q, want 1-3,9-11", free)
	}
}

func TestPublisherSkipsUnchangedObjectsButResyncs(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "the first apply", func() bool { n, _ := h.api.state(); return n == 1 })
	h.src.set(h.src.Snapshot())
	h.src.set(h.src.Snapshot())
	// A changed snapshot after the spurious notifications proves they were handled.
	s := h.src.Snapshot()
	s.Generation = 2
	h.src.set(s)
	eventually(t, "generation 2", func() bool { return h.api.generation() == "2" })
	if n, _ := h.api.state(); n != 2 {
		t.Errorf("%d applies for one change after two notifications without one; want 2 in all", n)
	}

	r := startPublisher(t, true, 5*time.Millisecond)
	eventually(t, "resync applies", func() bool { n, _ := r.api.state(); return n >= 3 })
}

func TestPublisherRetriesFailuresWithBackoff(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "the first apply", func() bool { n, _ := h.api.state(); return n == 1 })
	h.api.failNext(apierrors.NewInternalError(io.ErrUnexpectedEOF), apierrors.NewServiceUnavailable("etcd"), apierrors.NewTooManyRequests("slow down", 0))
	s := h.src.Snapshot()
	s.Generation = 5
	h.src.set(s)
	eventually(t, "generation 5 after three failures", func() bool { return h.api.generation() == "5" })
	if n, _ := h.api.state(); n != 5 {
		t.Errorf("%d applies, want 1 + 3 failed + 1", n)
	}
	if pub, failed := h.obs.counts(); pub != 2 || failed != 3 {
		t.Errorf("observer saw %d publishes and %d failures, want 2 and 3", pub, failed)
	}
	if st := h.pub.Status(); st.Error != "" || st.Generation != 5 {
		t.Errorf("status = %+v, want generation 5 and no error", st)
	}
}

func TestPublisherExplainsMissingCRDAndRBAC(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "the first apply", func() bool { return h.api.generation() == "1" })
	gr := nrt.GroupVersionResource.GroupResource()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{apierrors.NewNotFound(gr, testNode.Name), "daemonset/crds/noderesourcetopology.yaml"},
		{apierrors.NewForbidden(gr, testNode.Name, io.EOF), "finegrain-nodeagent-report ClusterRole"},
	} {
		h.api.failNext(tt.err, tt.err)
		s := h.src.Snapshot()
		s.Generation++
		h.src.set(s)
		eventually(t, "a failure", func() bool { return h.pub.Status().Error != "" })
		if err := h.pub.Status().Error; !strings.Contains(err, tt.want) {
			t.Errorf("status error %q does not say %q", err, tt.want)
		}
		want := strconv.FormatUint(s.Generation, 10)
		eventually(t, "recovery", func() bool { return h.api.generation() == want && h.pub.Status().Error == "" })
	}
}

func TestPublisherWaitsForItsNode(t *testing.T) {
	h := startPublisher(t, false, time.Hour)
	eventually(t, "a failed node lookup", func() bool { return strings.Contains(h.pub.Status().Error, "read Node node-a") })
	if n, _ := h.api.state(); n != 0 {
		t.Fatalf("%d applies before the Node exists; the ownerReference needs its UID", n)
	}
	if _, err := h.api.client.Resource(nodesResource).Create(context.Background(), nodeObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first apply", func() bool { return h.api.generation() == "1" })
	_, stored := h.api.state()
	if refs := stored.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != testNode.UID || refs[0].Kind != "Node" {
		t.Errorf("ownerReferences = %+v, want the Node %s", refs, testNode.UID)
	}
}

func TestNewPublisherRejectsIncompleteConfig(t *testing.T) {
	api := newAPIServer(t, true)
	topo := twoSocketSMT(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := newFakeSource(Snapshot{})
	for _, tt := range []struct {
		cfg  PublisherConfig
		want string
	}{
		{PublisherConfig{NodeName: "n", Topology: topo, Source: src, Logger: log}, "no API client"},
		{PublisherConfig{Client: api.client, Topology: topo, Source: src, Logger: log}, "no node name"},
		{PublisherConfig{Client: api.client, NodeName: "n", Source: src, Logger: log}, "no topology"},
		{PublisherConfig{Client: api.client, NodeName: "n", Topology: topo, Logger: log}, "no state source"},
		{PublisherConfig{Client: api.client, NodeName: "n", Topology: topo, Source: src}, "no logger"},
	} {
		if _, err := NewPublisher(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewPublisher = %v, want an error mentioning %q", err, tt.want)
		}
	}
}

func TestPublisherWaitsForTheAgentsState(t *testing.T) {
	h := startPublisher(t, true, time.Hour)
	eventually(t, "the first apply", func() bool { return h.api.generation() == "1" })
	full := h.src.Snapshot()
	// The state is gone, as before an agent's start-up rebuild.
	h.src.set(Snapshot{Generation: 2})
	eventually(t, "the publisher to notice the empty state", func() bool { return strings.Contains(h.pub.Status().Error, "has not rebuilt its state") })
	time.Sleep(20 * time.Millisecond)
	if n, _ := h.api.state(); n != 1 {
		t.Errorf("%d applies while the agent has no state; want none after the first", n-1)
	}
	if _, failed := h.obs.counts(); failed != 0 {
		t.Errorf("%d failures counted for an agent still starting; want none", failed)
	}
	full.Generation = 9
	h.src.set(full)
	eventually(t, "generation 9 once the state is back", func() bool { return h.api.generation() == "9" })
}
