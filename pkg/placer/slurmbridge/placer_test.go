package slurmbridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// fakeAPI makes a fake API server do what the placer and the bridge rely on: pods get UIDs, the
// binding subresource binds (the binding's annotations are not needed here), and the placer's events are stored as core/v1 Events, where the
// bridge reads them.
type fakeAPI struct {
	kube *fake.Clientset
	n    atomic.Int64
}

func (f *fakeAPI) giveUID(a k8stesting.Action) (bool, runtime.Object, error) {
	pod, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
	if !ok || pod.UID != "" {
		return false, nil, nil
	}
	pod = pod.DeepCopy()
	pod.UID = types.UID(fmt.Sprintf("uid-%s-%d", pod.Name, f.n.Add(1)))
	return true, pod, f.kube.Tracker().Create(podsGVR, pod, pod.Namespace)
}

func (f *fakeAPI) bind(a k8stesting.Action) (bool, runtime.Object, error) {
	b, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
	if !ok {
		return false, nil, nil
	}
	obj, err := f.kube.Tracker().Get(podsGVR, b.Namespace, b.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	pod.Spec.NodeName = b.Target.Name
	return true, b, f.kube.Tracker().Update(podsGVR, pod, b.Namespace)
}

// Eventf stores the placer's event as the API server would show it through core/v1.
func (f *fakeAPI) Eventf(regarding, _ runtime.Object, typ, reason, _, note string, args ...any) {
	m, ok := regarding.(metav1.Object)
	if !ok {
		return
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", m.GetName(), f.n.Add(1)), Namespace: m.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()},
		Type:           typ, Reason: reason, Message: fmt.Sprintf(note, args...), EventTime: metav1.NowMicro(),
	}
	_, _ = f.kube.CoreV1().Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
}

// noHooks is the rescale hooks of a placer without elastic jobs.
type noHooks struct{}

func (noHooks) Call(context.Context, *corev1.Pod, *v1alpha1.RescaleHook, []byte) error { return nil }

// boundIsPinned is a node agent that pins every bound placeholder at once.
type boundIsPinned struct{}

func (boundIsPinned) Pinned(_ context.Context, node string, p *corev1.Pod, _ string) (string, bool, error) {
	return "0", p.Spec.NodeName == node, nil
}

// The bridge with the real placer (its controller on fake clients, three nodes of four CPUs): a
// two-node job's placeholders are bound as one gang on two nodes and the job starts on their
// Slurm nodes; a three-CPU most-loaded job takes the third node (a node keeps one CPU shared), kept off the first job's nodes
// by exclusive nodes; a job submitted then fits nowhere and waits, its comment quoting the
// placer's reason; when the first job ends its placeholders go and the waiting job starts.
func TestBridgeWithThePlacer(t *testing.T) {
	in := st.Uniform("n", 3, 1, 4, 8)
	var typed, dyn []runtime.Object
	for _, n := range in.Nodes {
		typed = append(typed, n)
	}
	for _, u := range in.Topologies {
		dyn = append(dyn, u)
	}
	api := &fakeAPI{kube: fake.NewClientset(typed...)}
	api.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" {
			return api.bind(a)
		}
		return api.giveUID(a)
	})
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource: "NodeResourceTopologyList", v1alpha1.GroupVersionResource: "HPCJobList",
		schedv1alpha1.GroupVersionResource: "PodGroupList",
	}, dyn...)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	copts := controller.DefaultOptions()
	copts.InitialBackoff, copts.MaxBackoff, copts.ChangeDelay, copts.SnapshotTTL = 20*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond, 0
	copts.Hooks = noHooks{} // no elastic job here
	c, err := controller.New(api.kube, dc, api, prometheus.NewRegistry(), log, copts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	two := heldJob(1, 2, 4, 0)
	packed := heldJob(2, 1, 3, 0)
	packed.AdminComment = "finegrain placement=most-loaded"
	late := heldJob(3, 1, 2, 0)
	sl := &fakeSlurm{jobs: map[slurm.JobID]*slurm.Job{1: &two, 2: &packed}}
	opts := DefaultOptions()
	opts.DefaultMemoryPerCPU = 1 << 30
	b := New(api.kube, dc, boundIsPinned{}, &EventWaits{Kube: api.kube}, log, opts)
	cl := &Cluster{Namespace: "hpc", Name: "vc1", UID: "vc-uid", Slurm: sl,
		Nodes: map[string]string{"n-0000": "s0", "n-0001": "s1", "n-0002": "s2"}}

	// pass syncs once, after the kubelet runs every bound placeholder.
	pass := func() {
		l, err := api.kube.CoreV1().Pods("hpc").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			if p := &l.Items[i]; p.Spec.NodeName != "" && p.Status.Phase != corev1.PodRunning {
				p.Status.Phase = corev1.PodRunning
				if err := api.kube.Tracker().Update(podsGVR, p, p.Namespace); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := b.Sync(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s; Slurm commands %q", what, sl.calls)
			}
			pass()
		}
	}
	started := func(id slurm.JobID) string {
		for _, c := range sl.calls {
			if rest, ok := strings.CutPrefix(c, "start "+id.String()+" on "); ok {
				return rest
			}
		}
		return ""
	}
	until("jobs 1 and 2 to start", func() bool { return started(1) != "" && started(2) != "" })
	nodes1 := strings.Split(started(1), ",")
	if len(nodes1) != 2 || nodes1[0] == nodes1[1] {
		t.Fatalf("job 1 started on %q, want two distinct Slurm nodes", started(1))
	}
	if strings.Contains(started(1), started(2)) {
		t.Fatalf("job 2 started on %s, one of job 1's nodes %s: exclusive nodes not kept", started(2), started(1))
	}
	sl.jobs[1].State, sl.jobs[2].State = slurm.StateRunning, slurm.StateRunning
	sl.jobs[3] = &late
	until("job 3 to say why it waits", func() bool {
		return strings.HasPrefix(sl.jobs[3].Comment, CommentPrefix+"waiting for placement: ")
	})
	if started(3) != "" {
		t.Fatalf("job 3 started on %s while every node was held", started(3))
	}

	sl.jobs[1].State = slurm.StateCompleted
	until("job 3 to start once job 1's nodes are free", func() bool { return started(3) != "" })
	if !strings.Contains(started(1), started(3)) {
		t.Errorf("job 3 started on %s, want one of job 1's former nodes %s", started(3), started(1))
	}
	t.Logf("job 1 on %s, job 2 on %s, job 3 waited (%q) then ran on %s", started(1), started(2), sl.jobs[3].Comment, started(3))
}
