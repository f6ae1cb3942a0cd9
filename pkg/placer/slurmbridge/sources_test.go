package slurmbridge

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// vcPod is a pod of a virtual cluster: its role, node, readiness and controlling owner.
func vcPod(name, cluster, role, node string, ready bool, owner types.UID) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hpc", Labels: map[string]string{LabelVirtualCluster: cluster, v1alpha1.LabelRole: role}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "munged"}, {Name: role}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
	if owner != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "finegrain.dev/v1alpha1", Kind: "VirtualCluster", Name: cluster, UID: owner, Controller: &yes}}
	}
	return p
}

// A virtual cluster is found from its ready pods that its VirtualCluster controls: the bridge
// execs into the slurmctld container, and the ready slurmd pods' nodes are its nodes. A cluster
// without a ready slurmctld, and pods without the owner, do not count.
func TestClustersFromPods(t *testing.T) {
	kube := fake.NewClientset(
		vcPod("vc1-slurmctld", "vc1", v1alpha1.RoleSlurmctld, "k1", true, "u1"),
		vcPod("vc1-slurmd-k1", "vc1", v1alpha1.RoleSlurmd, "k1", true, "u1"),
		vcPod("vc1-slurmd-k2", "vc1", v1alpha1.RoleSlurmd, "k2", true, "u1"),
		vcPod("vc1-slurmd-k3", "vc1", v1alpha1.RoleSlurmd, "k3", false, "u1"),
		vcPod("fake-slurmd-k4", "vc1", v1alpha1.RoleSlurmd, "k4", true, ""),
		vcPod("vc2-slurmctld", "vc2", v1alpha1.RoleSlurmctld, "k1", false, "u2"),
		vcPod("vc2-slurmd-k1", "vc2", v1alpha1.RoleSlurmd, "k1", true, "u2"),
	)
	list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	cls := ClustersFromPods(&rest.Config{}, kube, pods)
	if len(cls) != 1 {
		t.Fatalf("clusters %+v, want vc1 only", cls)
	}
	cl := cls[0]
	if cl.Namespace != "hpc" || cl.Name != "vc1" || cl.UID != "u1" || len(cl.Nodes) != 2 || cl.Nodes["k1"] != "k1" || cl.Nodes["k2"] != "k2" {
		t.Fatalf("cluster %+v, want hpc/vc1 (u1) on k1 and k2", cl)
	}
	r, ok := cl.Slurm.(*slurm.Client).Runner.(*PodRunner)
	if !ok || r.Pod.Name != "vc1-slurmctld" || r.Container != v1alpha1.RoleSlurmctld {
		t.Fatalf("runner %+v, want the slurmctld container of vc1-slurmctld", cl.Slurm)
	}
}

// A placeholder counts as pinned once its container's entry is in the pins of its node's map.
func TestNRTPins(t *testing.T) {
	obj := &nrt.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "k1"},
		Zones: []nrt.Zone{{Name: "node-0", Type: nrt.ZoneTypeNode, Attributes: []nrt.Attribute{
			{Name: nrt.AttrFreeCPUs, Value: "0-1"},
			{Name: nrt.AttrPins, Value: "hpc/vc1-slurm-7-0/placeholder=2-3;hpc/other/c=4"},
		}}},
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	// Another node's map that (wrongly) lists the pod too: only the pod's node's map counts.
	obj.Name = "k3"
	u3, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nrt.GroupVersionResource: "NodeResourceTopologyList"}, u, u3)
	pins := NRTPins{Dyn: dyn}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: "vc1-slurm-7-0"}}
	for _, tc := range []struct {
		node, container string
		cpus            string
		ok              bool
	}{{"k1", ContainerName, "2-3", true}, {"k1", "other", "", false}, {"k2", ContainerName, "", false}} {
		cpus, ok, err := pins.Pinned(context.Background(), tc.node, pod, tc.container)
		if err != nil || cpus != tc.cpus || ok != tc.ok {
			t.Errorf("Pinned(%s, %s) = %q, %v, %v; want %q, %v", tc.node, tc.container, cpus, ok, err, tc.cpus, tc.ok)
		}
	}
}

// The placer's latest Unschedulable or GangTimeout warning on a pod says why it waits; other
// events, and those of a former pod of the same name, do not.
func TestEventWaits(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: "p", UID: "new"}}
	ev := func(name, reason, msg, uid string, at time.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: name}, Type: corev1.EventTypeWarning, Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "hpc", Name: "p", UID: types.UID(uid)}, LastTimestamp: metav1.NewTime(at)}
	}
	t0 := time.Now()
	kube := fake.NewClientset(
		ev("a", "Unschedulable", "old news", "new", t0),
		ev("b", "GangTimeout", "gang timed out: 2 CPUs", "new", t0.Add(time.Second)),
		ev("c", "Unschedulable", "of the former pod", "old", t0.Add(2*time.Second)),
		ev("d", "BindFailed", "another reason", "new", t0.Add(3*time.Second)),
	)
	w := &EventWaits{Kube: kube, Every: time.Hour}
	why, err := w.Why(context.Background(), pod)
	if err != nil || why != "gang timed out: 2 CPUs" {
		t.Fatalf("Why = %q, %v; want the GangTimeout message", why, err)
	}
	// Remembered for Every: a newer event is not read yet.
	if _, err := kube.CoreV1().Events("hpc").Create(context.Background(), ev("e", "Unschedulable", "newest", "new", t0.Add(4*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if why, _ = w.Why(context.Background(), pod); why != "gang timed out: 2 CPUs" {
		t.Fatalf("Why within Every = %q, want the remembered answer", why)
	}
	w.Every = 0
	if why, _ = w.Why(context.Background(), pod); why != "newest" {
		t.Fatalf("Why = %q, want newest", why)
	}
}

// The loop is off at interval 0, and otherwise passes over the clusters it finds until its
// context ends.
func TestLoop(t *testing.T) {
	kube := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	off := DefaultOptions()
	off.Interval = 0
	if err := NewLoop(&rest.Config{}, kube, dyn, log, off).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	on := DefaultOptions()
	on.Interval = 5 * time.Millisecond
	l := NewLoop(&rest.Config{}, kube, dyn, log, on)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lists, passes atomic.Int32
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	read := l.pods
	l.pods = func() ([]*corev1.Pod, error) {
		if passes.Add(1) == 3 {
			cancel()
		}
		return read()
	}
	if err := l.Run(ctx); err != nil || !l.HasSynced() {
		t.Fatalf("Run = %v, HasSynced %v", err, l.HasSynced())
	}
	if n := passes.Load(); n < 3 || ctx.Err() != context.Canceled {
		t.Errorf("%d passes before the loop stopped (%v), want it to pass until cancelled", n, ctx.Err())
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d pod lists for %d passes, want the informer's one", n, passes.Load())
	}
}
