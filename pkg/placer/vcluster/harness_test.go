package vcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

const ns = "hpc"

// fakeExec answers sinfo and squeue as the slurmctld pod's Slurm would, and records the pods it
// ran in.
type fakeExec struct {
	mu     sync.Mutex
	sinfo  string
	squeue string
	err    error
	pods   []string
}

func (f *fakeExec) Exec(_ context.Context, pod *corev1.Pod, container string, command []string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = append(f.pods, pod.Name+"/"+container)
	if f.err != nil {
		return nil, f.err
	}
	switch command[0] {
	case "sinfo":
		return []byte(f.sinfo), nil
	case "squeue":
		return []byte(f.squeue), nil
	}
	return nil, fmt.Errorf("unexpected command %v", command)
}

// harness is a controller on fake clients with nodes node-a (2 sockets × 4 cores × 2 threads,
// with the agent's layout) and node-b (4 CPUs, an older agent without it).
type harness struct {
	t    *testing.T
	kube *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	exec *fakeExec
	c    *Controller
}

func testNode(name, addr string, cpus int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "hpc"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("16Gi")},
		},
	}
}

func testNRT(node string, layout ...string) *unstructured.Unstructured {
	attrs := []any{}
	for i, name := range []string{nrt.AttrSockets, nrt.AttrCoresPerSocket, nrt.AttrThreadsPerCore} {
		attrs = append(attrs, map[string]any{"name": name, "value": layout[i]})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nrt.GroupVersionResource.GroupVersion().String(), "kind": nrt.Kind,
		"metadata": map[string]any{"name": node}, "attributes": attrs,
	}}
}

func vcObject(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.VirtualClusterKind,
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name, "generation": int64(1)},
		"spec":     spec,
	}}
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	kube := fake.NewClientset(testNode("node-a", "10.0.0.1", 16), testNode("node-b", "10.0.0.2", 4))
	var dynObjs []runtime.Object
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			dynObjs = append(dynObjs, u)
		} else if err := kube.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	dynObjs = append(dynObjs, testNRT("node-a", "2", "4", "2"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		v1alpha1.VirtualClusterGroupVersionResource: "VirtualClusterList",
		nrt.GroupVersionResource:                    "NodeResourceTopologyList",
	}, dynObjs...)
	ex := &fakeExec{sinfo: `{"nodes":[]}`, squeue: `{"jobs":[]}`}
	opts := DefaultOptions()
	opts.ResyncPeriod = 0
	shared := Informers{Kube: informers.NewSharedInformerFactory(kube, 0), Dynamic: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)}
	c := New(kube, dyn, shared, ex, events.NewFakeRecorder(100), slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	shared.Kube.Start(ctx.Done())
	shared.Dynamic.Start(ctx.Done())
	c.dynInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return &harness{t: t, kube: kube, dyn: dyn, exec: ex, c: c}
}

// reconcile runs one reconcile of the virtual cluster and waits until the informers show what
// it wrote (its status, its pods).
func (h *harness) reconcile(name string) {
	h.t.Helper()
	if err := h.c.reconcile(context.Background(), ns+"/"+name); err != nil {
		h.t.Fatalf("reconcile %s: %v", name, err)
	}
	h.settle()
}

// settle waits until the informers show the objects of the fake clients.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pods, _ := h.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		cached, _ := h.c.pods.Pods(ns).List(everything)
		vcs, _ := h.dyn.Resource(v1alpha1.VirtualClusterGroupVersionResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		inSync := len(pods.Items) == len(cached)
		for i := range pods.Items {
			p, err := h.c.pods.Pods(ns).Get(pods.Items[i].Name)
			inSync = inSync && err == nil && p.ResourceVersion == pods.Items[i].ResourceVersion
		}
		for _, v := range vcs.Items {
			o, err := h.c.clusters.ByNamespace(ns).Get(v.GetName())
			inSync = inSync && err == nil && o.(*unstructured.Unstructured).GetResourceVersion() == v.GetResourceVersion()
		}
		if inSync {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatal("informers did not catch up with the fake clients")
}

func (h *harness) vc(name string) *v1alpha1.VirtualCluster {
	h.t.Helper()
	u, err := h.dyn.Resource(v1alpha1.VirtualClusterGroupVersionResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	vc, err := decode(u)
	if err != nil {
		h.t.Fatal(err)
	}
	return vc
}

func (h *harness) ready(name string) metav1.Condition {
	h.t.Helper()
	for _, c := range h.vc(name).Status.Conditions {
		if c.Type == v1alpha1.VirtualClusterReady {
			return c
		}
	}
	h.t.Fatalf("virtual cluster %s has no Ready condition", name)
	return metav1.Condition{}
}

// markReady makes every pod of the namespace Running and Ready, as the kubelet would.
func (h *harness) markReady() {
	h.t.Helper()
	pods, _ := h.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := h.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		// The fake client keeps resource versions as they are: wait for the informer to show it.
		waitFor(h.t, func() bool { cached, err := h.c.pods.Pods(ns).Get(p.Name); return err == nil && podReady(cached) })
	}
}

func sinfoJSON(states map[string]string) string {
	var nodes []string
	for name, state := range states {
		base, flags, _ := strings.Cut(state, "+")
		fl := "[]"
		if flags != "" {
			fl = `["` + flags + `"]`
		}
		nodes = append(nodes, fmt.Sprintf(`{"name":%q,"state":%q,"state_flags":%s}`, name, strings.ToLower(base), fl))
	}
	return `{"errors":[],"nodes":[` + strings.Join(nodes, ",") + `]}`
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
