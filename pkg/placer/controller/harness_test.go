package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(o, _ runtime.Object, typ, reason, _, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if m, ok := o.(metav1.Object); ok {
		name = m.GetName()
	}
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", typ, reason, name, fmt.Sprintf(format, args...)))
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

func (r *recorder) find(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

// harness runs a controller against client-go fakes. The fake API server binds a pod when the
// binding subresource is created, merging the binding's annotations into the pod (the real one
// does; the fake only records the call), and can be told to fail bindings.
type harness struct {
	t      *testing.T
	kube   *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	c      *Controller
	rec    *recorder
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	failBind map[string]int // pod name → bindings left to fail
	bindings int
	uids     int
	// admit, when set, says why the fake admission refuses a pod (nil admits it).
	admit func(*corev1.Pod) error
	// dryRuns counts the dry runs of pod creation.
	dryRuns int
}

func testOptions() Options {
	o := DefaultOptions()
	o.InitialBackoff, o.MaxBackoff, o.ChangeDelay = 20*time.Millisecond, 200*time.Millisecond, 5*time.Millisecond
	o.SnapshotTTL = 0
	o.GangTimeout = time.Minute
	o.LauncherFailureGrace = 100 * time.Millisecond
	o.Hooks = &fakeHooks{}
	return o
}

func newHarness(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	var typed, dynamic []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			dynamic = append(dynamic, o)
		} else {
			typed = append(typed, o)
		}
	}
	h := &harness{t: t, kube: fake.NewClientset(typed...), rec: &recorder{}, reg: prometheus.NewRegistry(), failBind: map[string]int{}, done: make(chan struct{})}
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource: "NodeResourceTopologyList", v1alpha1.GroupVersionResource: "HPCJobList",
		schedv1alpha1.GroupVersionResource: "PodGroupList",
	}, dynamic...)
	h.kube.PrependReactor("create", "pods", h.giveUID)
	h.kube.PrependReactor("delete", "pods", h.checkUID)
	h.kube.PrependReactor("create", "pods", h.bind)
	h.kube.PrependReactor("create", "pods", h.dryRun)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := New(h.kube, h.dyn, h.rec, h.reg, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(h.stop)
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

// bind handles the pod writes that bind: the binding subresource and a pod created with its
// node set. Either may be told to fail.
// giveUID stores a created pod with a UID of its own, as the API server does (the fake gives
// none): a pod made again under its name is then told from its predecessor as in a cluster,
// instead of by the racy fallback for pods whose UID is unknown.
func (h *harness) giveUID(a k8stesting.Action) (bool, runtime.Object, error) {
	pod, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
	if !ok || pod.UID != "" {
		return false, nil, nil
	}
	pod = pod.DeepCopy()
	h.mu.Lock()
	h.uids++
	pod.UID = k8stypes.UID(fmt.Sprintf("uid-%s-%d", pod.Name, h.uids))
	h.mu.Unlock()
	if err := h.kube.Tracker().Create(podsGVR, pod, pod.Namespace); err != nil {
		return true, nil, err
	}
	return true, pod, nil
}

// checkUID refuses a deletion whose UID precondition names another pod than the one stored, as
// the API server does (the fake ignores preconditions).
func (h *harness) checkUID(a k8stesting.Action) (bool, runtime.Object, error) {
	da := a.(k8stesting.DeleteAction)
	pre := da.GetDeleteOptions().Preconditions
	if pre == nil || pre.UID == nil {
		return false, nil, nil
	}
	obj, err := h.kube.Tracker().Get(podsGVR, da.GetNamespace(), da.GetName())
	if err != nil {
		return false, nil, nil
	}
	if uid := obj.(*corev1.Pod).UID; uid != *pre.UID {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), da.GetName(),
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, uid))
	}
	return false, nil, nil
}

// dryRun answers a pod creation with dryRun=All as the API server does: admitted (or refused by
// h.admit) and not stored.
func (h *harness) dryRun(a k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := a.(k8stesting.CreateActionImpl)
	if !ok || len(ca.CreateOptions.DryRun) == 0 {
		return false, nil, nil
	}
	pod := ca.GetObject().(*corev1.Pod)
	h.mu.Lock()
	h.dryRuns++
	admit := h.admit
	h.mu.Unlock()
	if admit != nil {
		if err := admit(pod); err != nil {
			return true, nil, err
		}
	}
	return true, pod, nil
}

func (h *harness) bind(a k8stesting.Action) (bool, runtime.Object, error) {
	ca := a.(k8stesting.CreateAction)
	var name string
	switch o := ca.GetObject().(type) {
	case *corev1.Binding:
		name = o.Name
	case *corev1.Pod:
		if o.Spec.NodeName == "" {
			return false, nil, nil
		}
		name = o.Name
	default:
		return false, nil, nil
	}
	h.mu.Lock()
	h.bindings++
	fail := h.failBind[name] > 0
	if fail {
		h.failBind[name]--
	}
	h.mu.Unlock()
	if fail {
		return true, nil, apierrors.NewInternalError(errors.New("injected binding failure"))
	}
	b, ok := ca.GetObject().(*corev1.Binding)
	if !ok {
		return false, nil, nil
	}
	obj, err := h.kube.Tracker().Get(podsGVR, b.Namespace, b.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if pod.Spec.NodeName != "" {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, errors.New("pod is already assigned"))
	}
	pod.Spec.NodeName = b.Target.Name
	// The API server merges a binding's annotations into the pod.
	for k, v := range b.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	return true, b, h.kube.Tracker().Update(podsGVR, pod, b.Namespace)
}

// eventually polls cond until it holds or 10 s pass.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; events:\n%s", what, h.rec.all())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// never checks that cond stays false for d.
func (h *harness) never(what string, d time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			h.t.Fatalf("%s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) pods(ns string) []corev1.Pod {
	l, err := h.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func (h *harness) bound(ns string) (bound, pending int) {
	for _, p := range h.pods(ns) {
		if p.Spec.NodeName != "" {
			bound++
		} else {
			pending++
		}
	}
	return bound, pending
}

func (h *harness) job(ns, name string) *v1alpha1.HPCJob {
	u, err := h.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	data, _ := json.Marshal(u.Object)
	var job v1alpha1.HPCJob
	if err := json.Unmarshal(data, &job); err != nil {
		h.t.Fatal(err)
	}
	return &job
}

func (h *harness) phase(ns, name string) v1alpha1.Phase { return h.job(ns, name).Status.Phase }

func (h *harness) createJob(u *unstructured.Unstructured) {
	if _, err := h.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) createPod(p *corev1.Pod) {
	p.CreationTimestamp = metav1.Now()
	if _, err := h.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setPhase(ns, name string, phase corev1.PodPhase) {
	p, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	p.Status.Phase = phase
	if _, err := h.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) metric(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// cluster is n nodes of two NUMA nodes of cpus CPUs each, as objects for the fakes.
func cluster(n, cpus int) []runtime.Object {
	var out []runtime.Object
	in := st.Uniform("n", n, 2, cpus, 64)
	for _, node := range in.Nodes {
		out = append(out, node)
	}
	for _, u := range in.Topologies {
		out = append(out, u)
	}
	return out
}

// ownedBy makes the pod one that hpcJob(job) controls, as the placer makes them, with a UID.
func ownedBy(p *corev1.Pod, job string) *corev1.Pod {
	yes := true
	p.UID = k8stypes.UID("uid-pod-" + p.Name)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind, Name: job,
		UID: k8stypes.UID("uid-" + job), Controller: &yes, BlockOwnerDeletion: &yes}}
	return p
}

// priorityClass is a PriorityClass of the given value, the cluster's default when def is set.
func priorityClass(name string, value int32, def bool) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
}

// withClass names the job's PriorityClass.
func withClass(name string) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) { s.PriorityClassName = name }
}

// hpcJob is an HPCJob as the API server stores it. Its launcher is created with its workers
// (AtStartup): the fakes run no kubelet, so workers never become Ready unless a test says so
// (setReady) — tests of the default policy set it back.
func hpcJob(name string, tasks int, mutate func(*v1alpha1.HPCJobSpec)) *unstructured.Unstructured {
	spec := v1alpha1.HPCJobSpec{
		LauncherCreationPolicy: v1alpha1.AtStartup,
		Tasks:                  int32(tasks), Profile: v1alpha1.ProfileCPU, Granularity: v1alpha1.GranularityScale,
		TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
		Launcher:      corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mpirun", Image: "mpi"}}}},
		Worker:        corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "mpi"}}}},
	}
	if mutate != nil {
		mutate(&spec)
	}
	job := v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hpc", CreationTimestamp: metav1.Now(), UID: k8stypes.UID("uid-" + name)},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}
