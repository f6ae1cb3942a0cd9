package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func assumedPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// A pod made again under its name (a retried launcher): the informer's late news of the older
// pod — its deletion, or its bound copy — must not drop the successor's assumption.
func TestAssumptionsTellSameNamedPodsApart(t *testing.T) {
	a := newAssumptions(time.Minute)
	now := time.Now()
	a.add(assumedPod("j-launcher", "n1"))
	a.done("hpc/j-launcher", now, "uid-2")

	a.settle("hpc/j-launcher", seen{uid: "uid-1"})
	if !a.has("hpc/j-launcher") {
		t.Fatal("the older pod's deletion dropped its successor's assumption")
	}
	old := assumedPod("j-launcher", "n1")
	old.UID = "uid-1"
	got := a.overlay([]*corev1.Pod{old}, now)
	if len(got) != 1 || got[0].UID != "uid-2" || !a.has("hpc/j-launcher") {
		t.Fatalf("overlay of the older pod's copy: %+v; want the assumed successor", got)
	}
	a.settle("hpc/j-launcher", seen{node: "n1", uid: "uid-1"})
	if !a.has("hpc/j-launcher") {
		t.Fatal("the older pod shown bound dropped its successor's assumption")
	}

	a.settle("hpc/j-launcher", seen{node: "n1", uid: "uid-2"})
	if a.has("hpc/j-launcher") {
		t.Error("the successor shown bound kept its assumption")
	}

	// While a creation is in flight the pod has no UID: a deletion seen then is an older pod's.
	a.add(assumedPod("j-worker-0", "n1"))
	a.settle("hpc/j-worker-0", seen{uid: "uid-0"})
	if !a.has("hpc/j-worker-0") {
		t.Error("a deletion seen while the pod was being created dropped its assumption")
	}
	a.done("hpc/j-worker-0", now, "uid-9")
	a.settle("hpc/j-worker-0", seen{uid: "uid-9"})
	if a.has("hpc/j-worker-0") {
		t.Error("the pod's own deletion kept its assumption")
	}
}
