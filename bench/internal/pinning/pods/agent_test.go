package pods

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const agentNS, agentDS = "finegrain-system", "finegrain-nodeagent"

var agentLabels = map[string]string{"app.kubernetes.io/name": "finegrain-nodeagent"}

func agentDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentDS},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agentLabels},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/os": "linux"}}},
		},
	}
}

func agentPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name, Labels: agentLabels},
		Spec:       corev1.PodSpec{NodeName: "vm"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

// fakeKubectl writes a kubectl stand-in that records its arguments and prints, for get and
// apply, the object names the real one would.
func fakeKubectl(t *testing.T) (path, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "calls")
	path = filepath.Join(dir, "kubectl")
	script := `#!/bin/sh
echo "$*" >>` + record + `
case "$3" in
get) echo namespace/finegrain-system ;;
apply) printf 'namespace/finegrain-system\ndaemonset.apps/finegrain-nodeagent\nclusterrole.rbac.authorization.k8s.io/finegrain-nodeagent\n' ;;
esac
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, record
}

func control(t *testing.T, c *fake.Clientset, kubectl string) *agentControl {
	t.Helper()
	a, err := newAgentControl(context.Background(), agentControl{client: c, ns: agentNS, name: agentDS, node: "vm",
		kubectl: []string{kubectl, "--kubeconfig", "/k"}, overlay: "hack/cluster/overlay", timeout: 5 * time.Second, log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func nodeSelector(t *testing.T, c *fake.Clientset) map[string]string {
	t.Helper()
	ds, err := c.AppsV1().DaemonSets(agentNS).Get(context.Background(), agentDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Spec.Template.Spec.NodeSelector
}

// TestAgentPausedAndResumed: a deployed agent is paused by a node selector no node matches
// (the DaemonSet controller then removes its pod, played here by the test) and resumed by
// removing it, which leaves the DaemonSet's template as it was.
func TestAgentPausedAndResumed(t *testing.T) {
	c := fakeClient(agentDaemonSet(), agentPod("agent-1"))
	a := control(t, c, "/nonexistent/kubectl")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- a.set(ctx, false) }()
	for nodeSelector(t, c)[pauseLabel] != "true" {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.CoreV1().Pods(agentNS).Delete(ctx, "agent-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.set(ctx, false); err != nil {
		t.Fatalf("pausing a paused agent: %v", err)
	}
	go func() { done <- a.set(ctx, true) }()
	for nodeSelector(t, c)[pauseLabel] != "" {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.CoreV1().Pods(agentNS).Create(ctx, agentPod("agent-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if sel := nodeSelector(t, c); len(sel) != 1 || sel["kubernetes.io/os"] != "linux" {
		t.Errorf("node selector after resuming %v, want the DaemonSet's own", sel)
	}
	if err := a.restore(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAgentPausedByAnEarlierRunIsResumed: a run that died left the pause; this one puts the
// agent back at the end.
func TestAgentPausedByAnEarlierRunIsResumed(t *testing.T) {
	ds := agentDaemonSet()
	ds.Spec.Template.Spec.NodeSelector[pauseLabel] = "true"
	c := fakeClient(ds, agentPod("agent-3"))
	a := control(t, c, "/nonexistent/kubectl")
	if err := a.set(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := a.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, paused := nodeSelector(t, c)[pauseLabel]; paused {
		t.Error("the agent is still paused after restore")
	}
}

// TestAgentDeployedAndRemoved: an agent that was not deployed is deployed with kubectl apply -k
// when a scenario needs it, and restore deletes exactly the objects that apply created.
func TestAgentDeployedAndRemoved(t *testing.T) {
	kubectl, record := fakeKubectl(t)
	c := fakeClient()
	a := control(t, c, kubectl)
	ctx := context.Background()
	if err := a.set(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := a.restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(record); err == nil {
		t.Fatal("kubectl ran although the agent was never needed")
	}
	// What kubectl apply creates on a real cluster.
	if _, err := c.AppsV1().DaemonSets(agentNS).Create(ctx, agentDaemonSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(agentNS).Create(ctx, agentPod("agent-4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.set(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := a.restore(ctx); err != nil {
		t.Fatal(err)
	}
	calls, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	want := "--kubeconfig /k get -k hack/cluster/overlay -o name --ignore-not-found\n" +
		"--kubeconfig /k apply -k hack/cluster/overlay -o name\n" +
		"--kubeconfig /k delete --ignore-not-found --wait=true daemonset.apps/finegrain-nodeagent clusterrole.rbac.authorization.k8s.io/finegrain-nodeagent\n"
	if string(calls) != want {
		t.Errorf("kubectl calls:\n%s\nwant (the namespace existed before and stays):\n%s", calls, want)
	}
	if strings.Contains(string(calls), "delete --ignore-not-found --wait=true namespace") {
		t.Error("restore deleted a namespace that existed before")
	}
}
