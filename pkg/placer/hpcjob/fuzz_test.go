package hpcjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

const fuzzJob = `apiVersion: finegrain.dev/v1alpha1
kind: HPCJob
metadata: {name: j, namespace: hpc}
spec:
  tasks: 16
  profile: network
  granularity: scale
  taskResources: {cpu: "1", memory: 1Gi}
  launcher: {spec: {containers: [{name: mpirun, image: mpi}]}}
  worker: {spec: {containers: [{name: worker, image: mpi}]}}
`

// FuzzPlanJob decodes arbitrary job specs and plans every accepted one on a small cluster: no
// input may panic, and an accepted plan must run every task exactly once.
func FuzzPlanJob(f *testing.F) {
	f.Add([]byte(fuzzJob))
	f.Add([]byte(strings.Replace(fuzzJob, "profile: network", "profile: cpu", 1)))
	f.Add([]byte(strings.Replace(fuzzJob, "granularity: scale", "granularity: granularity", 1)))
	f.Add([]byte(strings.Replace(fuzzJob, "granularity: scale", "granularity: none\n  workers: 3", 1)))
	f.Add([]byte(strings.Replace(fuzzJob, "tasks: 16", "tasks: 64\n  elastic: {minReplicas: 1, maxReplicas: 8}", 1)))
	f.Add([]byte(strings.Replace(fuzzJob, "tasks: 16", "tasks: 16\n  gang: {minAvailable: 1}\n  exclusiveNodes: true\n  placement: most-loaded", 1)))
	in := st.Uniform("n", 3, 2, 8, 16)
	in.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	in.Pods = []*corev1.Pod{st.Pod("web", "a", "n-0001", "3", "1Gi", true)}
	s := snapshot.Build(in)
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := v1alpha1.Decode(data, "fuzz.yaml")
		if err != nil {
			return
		}
		jp, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName})
		if err != nil {
			return
		}
		total := 0
		for _, w := range jp.Workers {
			total += w.Tasks
		}
		if job.Spec.Elastic == nil && total != int(job.Spec.Tasks) {
			t.Fatalf("workers run %d tasks, the job has %d", total, job.Spec.Tasks)
		}
		if got := strings.Count(jp.Hostfile, "\n"); got != len(jp.Workers) {
			t.Fatalf("hostfile has %d lines for %d workers", got, len(jp.Workers))
		}
		if len(jp.Result.Placements)+len(jp.Result.Unplaced) != len(jp.Workers) {
			t.Fatalf("%d placed + %d unplaced != %d workers", len(jp.Result.Placements), len(jp.Result.Unplaced), len(jp.Workers))
		}
	})
}
