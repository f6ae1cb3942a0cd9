package pods

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeClient is a fake API server that also answers DeleteCollection of pods, as the real one does.
func fakeClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("delete-collection", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ns := a.GetNamespace()
		list, err := c.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), ns)
		if err != nil {
			return true, nil, err
		}
		for _, p := range list.(*corev1.PodList).Items {
			if err := c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ns, p.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return c
}

func podIn(ns, name string, phase corev1.PodPhase, states ...corev1.ContainerState) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for _, s := range states {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container, State: s})
	}
	return p
}

var (
	isRunning = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting   = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	exited    = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
)

func TestWait(t *testing.T) {
	c := fakeClient(
		podIn("b", "up", corev1.PodRunning, isRunning),
		podIn("b", "starting", corev1.PodPending, waiting),
		podIn("b", "done", corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}),
		podIn("b", "crashed", corev1.PodFailed, exited),
	)
	k := &kube{client: c, ns: "b", log: quiet}
	ctx := context.Background()
	got, err := k.wait(ctx, []string{"up"}, "running", time.Second, running)
	if err != nil || got["up"] == nil {
		t.Errorf("running pod: %v, %v", got, err)
	}
	if _, err := k.wait(ctx, []string{"up", "starting"}, "running", 300*time.Millisecond, running); err == nil ||
		!strings.Contains(err.Error(), "pods [starting] did not become running within 300ms; starting is phase Pending; fgworker waiting (ContainerCreating") {
		t.Errorf("a pod that never starts: %v", err)
	}
	if _, err := k.wait(ctx, []string{"crashed"}, "running", time.Second, running); err == nil ||
		!strings.Contains(err.Error(), "pod b/crashed can no longer become running: it ended in phase Failed") ||
		!strings.Contains(err.Error(), "fgworker terminated (exit 1, Error)") {
		t.Errorf("a pod that ended: %v", err)
	}
	got, err = k.wait(ctx, []string{"done", "crashed"}, "finished", time.Second, ended)
	if err != nil || len(got) != 2 {
		t.Errorf("ended pods: %v, %v", got, err)
	}
	if _, err := k.wait(ctx, []string{"gone"}, "finished", time.Second, ended); err == nil || !strings.Contains(err.Error(), "pod b/gone") {
		t.Errorf("a pod that does not exist: %v", err)
	}
	if err := k.deletePods(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.CoreV1().Pods("b").List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d pods left after deletePods", len(list.Items))
	}
}

func TestNamespace(t *testing.T) {
	c := fakeClient()
	// The fake API server creates no default service account; the real one's controller does.
	c.PrependReactor("create", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ns := a.(k8stesting.CreateAction).GetObject().(*corev1.Namespace).DeepCopy()
		ns.Name = ns.GenerateName + "x1"
		if err := c.Tracker().Add(ns); err != nil {
			return true, nil, err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}}
		return true, ns, c.Tracker().Add(sa)
	})
	k, err := newNamespace(context.Background(), c, time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if k.ns != "pinning-bench-x1" {
		t.Errorf("namespace %q", k.ns)
	}
	if err := k.close(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Get(context.Background(), k.ns, metav1.GetOptions{}); err == nil {
		t.Error("the namespace is still there after close")
	}
}
