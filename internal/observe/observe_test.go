package observe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodSummary(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}},
			{Name: "b", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}},
		},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/1 nodes are available"},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Message: "ignored"},
		},
	}}
	want := "phase Pending; a waiting (ErrImageNeverPull: not present); b running; c terminated (exit 2, Error); PodScheduled: 0/1 nodes are available"
	if got := PodSummary(p); got != want {
		t.Errorf("PodSummary =\n%q, want\n%q", got, want)
	}
}

// The shape of `ctr containers info` output (containerd 2.x), trimmed to what is read.
func TestSpecCPUs(t *testing.T) {
	got, err := specCPUs([]byte(`{"ID":"abc","Spec":{"ociVersion":"1.2.0","linux":{"resources":{"cpu":{"shares":1024,"cpus":"2-3","mems":"0"}}}}}`))
	if err != nil || got != "2-3" {
		t.Errorf("specCPUs = %q, %v; want 2-3", got, err)
	}
	if _, err := specCPUs([]byte("ctr: container not found")); err == nil {
		t.Error("specCPUs accepted output that is not JSON")
	}
}
