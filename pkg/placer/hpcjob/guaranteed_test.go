package hpcjob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// A job that gives no taskResources.memory still has Guaranteed workers: the default memory per
// task times the worker's tasks is both the request and the limit, as its CPUs are. Once running,
// such a worker is in the pods fingerprint scheduler-plugins recomputes, and its NUMA filter
// checks it (a Burstable worker would pass the filter unchecked).
func TestWorkersAreGuaranteedWithoutTaskMemory(t *testing.T) {
	job := newJob(4, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.TaskResources.Memory = resource.Quantity{}
	v1alpha1.SetDefaults(&job.Spec)
	if got := job.Spec.TaskResources.Memory.Value(); got != v1alpha1.DefaultTaskMemoryBytes {
		t.Fatalf("taskResources.memory defaults to %d bytes, want %d", got, v1alpha1.DefaultTaskMemoryBytes)
	}
	w := WorkerPod(job, Worker{Index: 0, Name: "j-worker-0", Tasks: 3, Port: 22}, v1alpha1.DefaultSchedulerName)
	r := w.Spec.Containers[0].Resources
	if r.Requests.Memory().Value() != 3<<30 || !r.Requests.Memory().Equal(*r.Limits.Memory()) || !r.Requests.Cpu().Equal(*r.Limits.Cpu()) {
		t.Fatalf("worker resources %v, want requests = limits with 3 CPUs and 3Gi", r)
	}
	w.Spec.NodeName = "node-a"
	w.Status.Phase = corev1.PodRunning
	if !nrt.CountsInFingerprint(w) {
		t.Error("a running worker is not in the pods fingerprint scheduler-plugins counts: it is not Guaranteed")
	}
}
