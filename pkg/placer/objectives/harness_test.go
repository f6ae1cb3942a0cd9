package objectives

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

const ns = "shop"

// gaugeServer is a service's pod endpoint serving one gauge whose value the test sets.
type gaugeServer struct {
	srv   *httptest.Server
	value atomic.Value
	hits  atomic.Int64
}

func newGaugeServer(t *testing.T, v float64) *gaugeServer {
	t.Helper()
	g := &gaugeServer{}
	g.value.Store(v)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.hits.Add(1)
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "# TYPE web_p99_seconds gauge\nweb_p99_seconds %v\n", g.value.Load())
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gaugeServer) set(v float64) { g.value.Store(v) }

// hostPort is the server's IP and port, as a pod's IP and the objective's port.
func (g *gaugeServer) hostPort(t *testing.T) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(g.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// harness is a controller on fake clients holding one objective "web-p99" on Deployment "web".
type harness struct {
	t        *testing.T
	kube     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	recorder *events.FakeRecorder
	reg      *prometheus.Registry
	c        *Controller
	opts     Options
	now      time.Time
}

var objectiveGVR = v1alpha1.ServiceObjectiveGroupVersionResource

func newHarness(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, opts: opts, now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	h.kube = fake.NewClientset(objs...)
	h.kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: v1alpha1.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: v1alpha1.Resource}, {Name: v1alpha1.ServiceObjectiveResource}},
	}, {
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "pods"}, {Name: "pods/binding"}, {Name: "pods/resize"}},
	}}
	scaleReactors(h.kube)
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		objectiveGVR: "ServiceObjectiveList",
	})
	h.restart()
	return h
}

// restart makes a new controller on the same clients, as a restarted or new leader would be:
// nothing is kept but what the API server holds.
func (h *harness) restart() {
	h.t.Helper()
	h.recorder = events.NewFakeRecorder(100)
	h.reg = prometheus.NewRegistry()
	c, err := New(h.kube, h.dyn, h.recorder, h.reg, slog.New(slog.NewTextHandler(io.Discard, nil)), h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	// What Run learns once the API is served.
	c.resizeServed = c.servesResize()
	h.c = c
}

// scaleReactors makes the fake clientset serve the scale subresource of Deployments from and to
// their spec.replicas, as the API server does.
func scaleReactors(kube *fake.Clientset) {
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	kube.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		obj, err := kube.Tracker().Get(gvr, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment)
		return true, &autoscalingv1.Scale{ObjectMeta: d.ObjectMeta, Spec: autoscalingv1.ScaleSpec{Replicas: replicasOf(d.Spec.Replicas)}}, nil
	})
	kube.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		obj, err := kube.Tracker().Get(gvr, a.GetNamespace(), s.Name)
		if err != nil {
			return true, nil, err
		}
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.Spec.Replicas = ptr.To(s.Spec.Replicas)
		return true, s, kube.Tracker().Update(gvr, d, a.GetNamespace())
	})
}

// deployment is Deployment "web" of replicas pods, and its ReplicaSet.
func deployment(replicas int32) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: "web-7d9f", Namespace: ns, UID: "uid-web-7d9f", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: ptr.To(true)}},
	}}
	return d, rs
}

// pod is a Running, Ready, Guaranteed pod of the ReplicaSet at ip with cpu and memory.
func pod(name, ip, cpu, memory string) *corev1.Pod {
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "uid-web-7d9f", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName:   "n1",
			Containers: []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, QOSClass: corev1.PodQOSGuaranteed,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "web", Ready: true,
				Resources: &corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list.DeepCopy()},
			}},
		},
	}
}

// objectiveSpec is "web-p99": p99 ≤ 20 ms read from the pods on port, 0.5 to 4 CPU and 512Mi to
// 4Gi per pod, 1 to 4 replicas, every 10 s.
func objectiveSpec(port int32) map[string]any {
	return map[string]any{
		"targetRef": map[string]any{"kind": "Deployment", "name": "web"},
		"metric": map[string]any{
			"target": "20m", "direction": "AtMost",
			"source": map[string]any{"pods": map[string]any{"port": int64(port), "metric": "web_p99_seconds"}},
		},
		"podBounds": map[string]any{
			"min": map[string]any{"cpu": "500m", "memory": "512Mi"},
			"max": map[string]any{"cpu": "4", "memory": "4Gi", "ioBandwidth": "100M"},
		},
		"replicas": map[string]any{"min": int64(1), "max": int64(4)},
	}
}

// createObjective stores an objective with spec (and status, when given).
func (h *harness) createObjective(spec map[string]any, status *v1alpha1.ServiceObjectiveStatus) {
	h.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.ServiceObjectiveKind,
		"metadata": map[string]any{"name": "web-p99", "namespace": ns, "generation": int64(1)},
		"spec":     spec,
	}}
	if status != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
		if err != nil {
			h.t.Fatal(err)
		}
		u.Object["status"] = m
	}
	if _, err := h.dyn.Resource(objectiveGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// period runs one period of the objective as the API server holds it, at h.now, and then
// advances h.now by the period it returned.
func (h *harness) period() {
	h.t.Helper()
	u, err := h.dyn.Resource(objectiveGVR).Namespace(ns).Get(context.Background(), "web-p99", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.kube.ClearActions()
	period, _ := h.c.reconcile(context.Background(), u, h.now)
	h.now = h.now.Add(period)
}

// run starts the loop; the function it returns stops it and waits for it to end.
func (h *harness) run() func() {
	ctx, cancel := context.WithCancel(h.t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Error(err)
		}
	}
}

// status is the objective's status as the API server holds it.
func (h *harness) status() *v1alpha1.ServiceObjectiveStatus {
	h.t.Helper()
	u, err := h.dyn.Resource(objectiveGVR).Namespace(ns).Get(context.Background(), "web-p99", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var obj v1alpha1.ServiceObjective
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		h.t.Fatal(err)
	}
	return &obj.Status
}

// condition returns the status's condition typ ("" reason when absent).
func condition(st *v1alpha1.ServiceObjectiveStatus, typ string) (metav1.ConditionStatus, string, string) {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// pod reads a pod back.
func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// replicas is the Deployment's spec.replicas.
func (h *harness) replicas() int32 {
	h.t.Helper()
	d, err := h.kube.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return replicasOf(d.Spec.Replicas)
}

// events drains the events recorded so far.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// resizes are the pods patched through their resize subresource in the last period.
func (h *harness) resizes() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "pods" {
			if a.GetSubresource() != "resize" {
				h.t.Errorf("pod %s patched through %q, want the resize subresource", p.GetName(), a.GetSubresource())
			}
			out = append(out, p.GetName())
		}
	}
	return out
}

// metric is the value of a series of the loop's metrics (-1 when absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
