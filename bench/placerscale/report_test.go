package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got := percentile(v, tc.p); got != tc.want {
			t.Errorf("percentile(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("percentile of nothing = %v, want NaN", got)
	}
}

func TestTableComparesCompleteRoundsOnly(t *testing.T) {
	res := &results{Nodes: 10, NUMAPerNode: 2, CPUsPerNUMA: 32, QPS: 500, Burst: 1000, Rounds: []*roundResult{
		{Kind: kindPods, Scheduler: "placer", Pods: 100, Bound: 100, Rate: 400, Steady: 500, Annotated: 99, CPU: 0.1},
		{Kind: kindPods, Scheduler: "kube-scheduler", Pods: 100, Bound: 100, Rate: 200, Steady: 250, CPU: 0.8},
		{Kind: kindPods, Scheduler: "kube-scheduler", Round: 1, Pods: 100, Bound: 50, Rate: 10, Steady: 10},
		{Kind: kindJob, Scheduler: "placer", Pods: 100, Bound: 100, Rate: 300, Steady: 300, Annotated: 100, CPU: 0.2},
		{Kind: kindJob, Scheduler: "kube-scheduler", Pods: 100, Bound: 100, Rate: 100, Steady: 150, CPU: 0.6},
	}, Gangs: &gangResult{Gangs: 2, PodsPerGang: 3, Wait: []float64{1, 2}, Spread: []float64{0.1, 0.2}}}
	out := table(res)
	for _, want := range []string{
		"pods rounds, mean over complete ones: placer 400 pods/s (10–90 %: 500, 1 rounds), kube-scheduler 200 pods/s (10–90 %: 250, 1 rounds): placer / kube-scheduler = 2.00× (10–90 %: 2.00×); scheduler CPU per bound pod: placer 1.00 ms, kube-scheduler 8.00 ms (8.0× less)",
		"| pods | 0 | placer | 100 / 100 | 0.00 s | 0.00 s | 400 | 500 | 0.1 s | 1.00 ms |",
		"job rounds, mean over complete ones: placer 300 pods/s (10–90 %: 300, 1 rounds), kube-scheduler 100 pods/s (10–90 %: 150, 1 rounds): placer / kube-scheduler = 3.00× (10–90 %: 2.00×); scheduler CPU per bound pod: placer 2.00 ms, kube-scheduler 6.00 ms (3.0× less)",
		"placer pods round 0: 1 of 100 bound pods lack the NUMA node annotation",
		"p50 1.00 s, p99 2.00 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestFakeNodeNames(t *testing.T) {
	for _, i := range []int{0, 7, 999, 9999} {
		if n := nodeName(i); !isFakeNode(n) {
			t.Errorf("isFakeNode(%q) = false for the name of fake node %d", n, i)
		}
	}
	for _, n := range []string{"placerscale-", "placerscale-12", "placerscale-12345", "placerscale-abcd", "node-0001", "127.0.0.1"} {
		if isFakeNode(n) {
			t.Errorf("isFakeNode(%q) = true: its Lease would be deleted", n)
		}
	}
}

func TestOptionsNameWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	_, err := parseOptions([]string{"-kwok", bin, "-kube-scheduler", bin, "-placer", filepath.Join(dir, "missing"), "-kubeconfig", bin,
		"-nodes", "10", "-gang-nodes", "20"}, &stderr)
	if err == nil {
		t.Fatal("options with a missing placer and more gang nodes than nodes were accepted")
	}
	for _, want := range []string{"-placer " + filepath.Join(dir, "missing"), "-gang-nodes 20"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := parseOptions([]string{"-kwok", bin, "-kube-scheduler", bin, "-placer", bin, "-kubeconfig", bin}, &stderr); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// A DaemonSet that tolerates every taint (a node agent's) would run a pod on each fake node: the
// benchmark refuses to start, naming it; one that tolerates only its own taints is fine.
func TestPreflightRefusesADaemonSetOnTheFakeNodes(t *testing.T) {
	ds := func(name string, tol corev1.Toleration) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "finegrain-system", Name: name},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{tol}}}}}
	}
	kube := fake.NewClientset(ds("narrow", corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}))
	if err := noDaemonSetOnFakeNodes(context.Background(), kube); err != nil {
		t.Errorf("a DaemonSet tolerating another taint: %v", err)
	}
	kube = fake.NewClientset(ds("finegrain-nodeagent", corev1.Toleration{Operator: corev1.TolerationOpExists}))
	err := noDaemonSetOnFakeNodes(context.Background(), kube)
	if err == nil || !strings.Contains(err.Error(), "DaemonSet finegrain-system/finegrain-nodeagent tolerates the fake nodes' taint") {
		t.Errorf("a DaemonSet tolerating everything: error %v, want one naming it", err)
	}
}
