package agentbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const agentNS, agentName = "fg-system", "fg-agent"

var agentLabels = map[string]string{"app": "fg-agent"}

// newCluster returns a fake cluster with the agent's DaemonSet running args on one node, rolled
// out, and its ready pod. Updates of the DaemonSet's spec raise its generation, as the API server
// does.
func newCluster(t *testing.T, args ...string) *fake.Clientset {
	t.Helper()
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentName, Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agentLabels},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Args: args}}}},
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberReady: 1, NumberAvailable: 1},
	}
	kube := fake.NewClientset(ds, agentPod("fg-agent-0", args, true))
	kube.PrependReactor("update", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetSubresource() == "" {
			u.GetObject().(*appsv1.DaemonSet).Generation++
		}
		return false, nil, nil
	})
	return kube
}

func agentPod(name string, args []string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name, Labels: agentLabels},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "agent", Args: args}}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// controller plays the DaemonSet controller and the kubelet of the one node until ctx ends: when
// the template's arguments change it replaces the agent's pod by one running them, which turns
// ready on its next round, and only then reports the new generation rolled out.
func controller(ctx context.Context, t *testing.T, kube *fake.Clientset) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ctx.Err() == nil; n++ {
			if err := controllerRound(ctx, kube, n); err != nil && ctx.Err() == nil {
				t.Errorf("fake DaemonSet controller: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return done
}

func controllerRound(ctx context.Context, kube *fake.Clientset, n int) error {
	dss, pods := kube.AppsV1().DaemonSets(agentNS), kube.CoreV1().Pods(agentNS)
	ds, err := dss.Get(ctx, agentName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	args := ds.Spec.Template.Spec.Containers[0].Args
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	status := `{"status":{"observedGeneration":%d,"desiredNumberScheduled":1,"updatedNumberScheduled":%d,"numberReady":%d}}`
	for _, p := range list.Items {
		switch {
		case !slices.Equal(p.Spec.Containers[0].Args, args):
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		case !ready(&p):
			p.Status.Conditions[0].Status = corev1.ConditionTrue
			if _, err := pods.UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
				return err
			}
			_, err := dss.Patch(ctx, agentName, types.MergePatchType, fmt.Appendf(nil, status, ds.Generation, 1, 1), metav1.PatchOptions{}, "status")
			return err
		default:
			return nil
		}
	}
	if _, err := pods.Create(ctx, agentPod(fmt.Sprintf("fg-agent-%d", n), args, false), metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = dss.Patch(ctx, agentName, types.MergePatchType, fmt.Appendf(nil, status, ds.Generation, 1, 0), metav1.PatchOptions{}, "status")
	return err
}

func TestSetArgsRollsOut(t *testing.T) {
	kube := newCluster(t, "--cgroup-driver=cgroupfs", "--nri=auto")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := controller(ctx, t, kube)
	defer func() { cancel(); <-done }()
	d := DaemonSet{Client: kube, Namespace: agentNS, Name: agentName}
	want := []string{"--cgroup-driver=cgroupfs", "--nri=off"}
	pod, err := d.SetArgs(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pod.Spec.Containers[0].Args, want) || !ready(pod) || pod.Name == "fg-agent-0" {
		t.Errorf("SetArgs returned pod %s with args %q, ready %v; want a new ready pod running %q", pod.Name, pod.Spec.Containers[0].Args, ready(pod), want)
	}
	if got, err := d.Args(ctx); err != nil || !slices.Equal(got, want) {
		t.Errorf("Args after SetArgs = %q, %v; want %q", got, err, want)
	}
}

func TestSetArgsUnchanged(t *testing.T) {
	args := []string{"--nri=on"}
	kube := newCluster(t, args...)
	pod, err := DaemonSet{Client: kube, Namespace: agentNS, Name: agentName}.SetArgs(context.Background(), slices.Clone(args))
	if err != nil || pod.Name != "fg-agent-0" {
		t.Fatalf("SetArgs(the same arguments) = %v, %v; want the running pod", pod, err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("SetArgs(the same arguments) updated %s", a.GetResource().Resource)
		}
	}
}

// A pod with the new arguments that never turns ready is not taken for the rolled-out agent.
func TestSetArgsWaitsForReady(t *testing.T) {
	kube := newCluster(t, "--nri=on")
	if err := kube.Tracker().Add(agentPod("fg-agent-new", []string{"--nri=off"}, false)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	pod, err := DaemonSet{Client: kube, Namespace: agentNS, Name: agentName}.SetArgs(ctx, []string{"--nri=off"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SetArgs with no ready new pod = %v, %v; want the context's end", pod, err)
	}
}

func TestSetArgsMissingDaemonSet(t *testing.T) {
	d := DaemonSet{Client: fake.NewClientset(), Namespace: agentNS, Name: agentName}
	if _, err := d.SetArgs(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "agent DaemonSet fg-system/fg-agent") {
		t.Errorf("SetArgs without the DaemonSet = %v, want an error naming it", err)
	}
	if _, err := d.Args(context.Background()); err == nil || !strings.Contains(err.Error(), "agent DaemonSet fg-system/fg-agent") {
		t.Errorf("Args without the DaemonSet = %v, want an error naming it", err)
	}
}

func TestReplaceFlags(t *testing.T) {
	args := []string{"--cgroup-driver=cgroupfs", "--nri=auto", "--nri-socket=/x.sock", "--inotify", "--cri-endpoint=unix:///c.sock", "--inotify-extra=1"}
	in := slices.Clone(args)
	got := ReplaceFlags(args, []string{"nri", "inotify", "cri-endpoint"}, "--nri=off", "--inotify=true")
	want := []string{"--cgroup-driver=cgroupfs", "--nri-socket=/x.sock", "--inotify-extra=1", "--nri=off", "--inotify=true"}
	if !slices.Equal(got, want) {
		t.Errorf("ReplaceFlags = %q, want %q", got, want)
	}
	if !slices.Equal(args, in) {
		t.Errorf("ReplaceFlags changed its input to %q", args)
	}
	if got := ReplaceFlags(nil, []string{"nri"}); len(got) != 0 {
		t.Errorf("ReplaceFlags(nil) = %q", got)
	}
}
