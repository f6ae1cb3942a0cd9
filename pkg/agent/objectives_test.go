package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func partial(kind, ns, name, uid string, owner *metav1.OwnerReference) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
	}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func ctrlRef(kind, name, uid string) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}
}

// objective returns a ServiceObjective as the API server serves it, with status.podSize's
// ioBandwidth when io is not empty.
func objective(ns, name string, kind v1alpha1.TargetKind, target, io string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.ServiceObjectiveKind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"targetRef": map[string]any{"kind": string(kind), "name": target}},
	}}
	if io != "" {
		u.Object["status"] = map[string]any{"podSize": map[string]any{"ioBandwidth": io}}
	}
	return u
}

func ownedPod(ns, name string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "11111111-0000-4000-8000-000000000001"}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func newObjectives(t *testing.T, meta ...runtime.Object) *Objectives {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metadatafake.NewSimpleMetadataClient(scheme, meta...)
	return NewObjectives(nil, mc, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestPodIOBandwidthFollowsOwners places pods under objectives only through uid-checked
// controller references: Deployment → ReplicaSet → pod and StatefulSet → pod, in the
// objective's namespace; a reference to an object that is not there (or is another object of
// that name) places the pod nowhere.
func TestPodIOBandwidthFollowsOwners(t *testing.T) {
	o := newObjectives(t,
		partial("Deployment", "shop", "web", "d-1", nil),
		partial("ReplicaSet", "shop", "web-7f9", "rs-1", ctrlRef("Deployment", "web", "d-1")),
		partial("ReplicaSet", "shop", "stale", "rs-2", ctrlRef("Deployment", "web", "d-old")),
		partial("StatefulSet", "shop", "db", "s-1", nil),
	)
	o.put(objective("shop", "web-p99", v1alpha1.TargetDeployment, "web", "10M"))
	o.put(objective("shop", "db-tput", v1alpha1.TargetStatefulSet, "db", "25Mi"))
	o.put(objective("other", "web-p99", v1alpha1.TargetDeployment, "web", "1M"))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		bps  uint64
		key  string
	}{
		{"deployment's pod", ownedPod("shop", "web-7f9-a", ctrlRef("ReplicaSet", "web-7f9", "rs-1")), 10_000_000, "shop/web-p99"},
		{"statefulset's pod", ownedPod("shop", "db-0", ctrlRef("StatefulSet", "db", "s-1")), 25 << 20, "shop/db-tput"},
		{"forged replicaset uid", ownedPod("shop", "x", ctrlRef("ReplicaSet", "web-7f9", "rs-forged")), 0, ""},
		{"replicaset of a deleted deployment", ownedPod("shop", "y", ctrlRef("ReplicaSet", "stale", "rs-2")), 0, ""},
		{"absent replicaset", ownedPod("shop", "z", ctrlRef("ReplicaSet", "gone", "rs-3")), 0, ""},
		{"forged statefulset uid", ownedPod("shop", "db-1", ctrlRef("StatefulSet", "db", "s-forged")), 0, ""},
		{"bare pod", ownedPod("shop", "bare", nil), 0, ""},
		{"another namespace", ownedPod("else", "web-7f9-a", ctrlRef("ReplicaSet", "web-7f9", "rs-1")), 0, ""},
	} {
		bps, key, err := o.PodIOBandwidth(ctx, tc.pod)
		if err != nil || bps != tc.bps || key != tc.key {
			t.Errorf("%s: %d %q %v, want %d %q", tc.name, bps, key, err, tc.bps, tc.key)
		}
	}

	// A second objective on the same workload: the smaller I/O size holds; one that has not
	// decided a size yet does not lift it.
	o.put(objective("shop", "web-tput", v1alpha1.TargetDeployment, "web", "4M"))
	o.put(objective("shop", "web-new", v1alpha1.TargetDeployment, "web", ""))
	pod := ownedPod("shop", "web-7f9-a", ctrlRef("ReplicaSet", "web-7f9", "rs-1"))
	if bps, key, _ := o.PodIOBandwidth(ctx, pod); bps != 4_000_000 || key != "shop/web-tput" {
		t.Errorf("two objectives: %d %q, want the smaller, 4000000 from shop/web-tput", bps, key)
	}
	o.drop("shop/web-tput")
	o.drop("shop/web-p99")
	if bps, key, _ := o.PodIOBandwidth(ctx, pod); bps != 0 || key != "shop/web-new" {
		t.Errorf("only an objective without a size: %d %q, want no limit from shop/web-new", bps, key)
	}
}

// TestObjectivesRun lists and watches ServiceObjectives: the generation counts changes of
// target or I/O size (not of anything else), and Changed fires.
func TestObjectivesRun(t *testing.T) {
	scheme := runtime.NewScheme()
	gvr := v1alpha1.ServiceObjectiveGroupVersionResource
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{gvr: "ServiceObjectiveList"},
		objective("shop", "web-p99", v1alpha1.TargetDeployment, "web", "10M"))
	o := NewObjectives(dyn, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, ok := o.Generation(); ok {
		t.Fatal("synced before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { _, ok := o.Generation(); return ok })
	g0, _ := o.Generation()
	drain(o.Changed())

	u := objective("shop", "web-p99", v1alpha1.TargetDeployment, "web", "20M")
	if _, err := dyn.Resource(gvr).Namespace("shop").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { g, _ := o.Generation(); return g > g0 })
	select {
	case <-o.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("Changed did not fire")
	}
	o.mu.Lock()
	got := o.objs["shop/web-p99"].bps
	o.mu.Unlock()
	if got != 20_000_000 {
		t.Errorf("I/O size after the update %d, want 20000000", got)
	}
	g1, _ := o.Generation()
	if err := dyn.Resource(gvr).Namespace("shop").Delete(ctx, "web-p99", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { g, _ := o.Generation(); return g > g1 })
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
