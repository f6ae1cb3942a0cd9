package hpcjob

import (
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// BenchmarkPlanJob is the whole dry run of a 1,000-worker job over 5,000 nodes: granularity
// selection (counting available nodes), expansion into 1,000 worker pods, and the gang plan.
func BenchmarkPlanJob(b *testing.B) {
	cases := []struct {
		name    string
		profile v1alpha1.Profile
		gran    v1alpha1.Granularity
		tasks   int32
		workers int32
	}{
		{"granularity/1000tasks", v1alpha1.ProfileCPU, v1alpha1.GranularityFine, 1000, 0},
		{"scale/1000tasks", v1alpha1.ProfileMemory, v1alpha1.GranularityScale, 1000, 0},
		{"none/4000tasks/1000workers", v1alpha1.ProfileCPU, v1alpha1.GranularityNone, 4000, 1000},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := snapshot.Build(st.Uniform("n", 5000, 2, 32, 128))
			job := newJob(tc.tasks, tc.profile, tc.gran)
			job.Spec.Workers = tc.workers
			jp, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName})
			if err != nil {
				b.Fatal(err)
			}
			if len(jp.Workers) != 1000 {
				b.Fatalf("%d workers, want 1000", len(jp.Workers))
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
