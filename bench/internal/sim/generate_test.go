package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func TestGenerateDistributions(t *testing.T) {
	const n, cpus, load = 3000, 576, 0.5
	jobs := generated(t, n, cpus, 42, load)
	if diff := cmp.Diff(jobs, generated(t, n, cpus, 42, load)); diff != "" {
		t.Fatalf("same seed, different jobs:\n%s", diff)
	}
	if cmp.Equal(jobs, generated(t, n, cpus, 43, load)) {
		t.Fatal("seeds 42 and 43 give the same jobs")
	}
	profiles := map[v1alpha1.Profile]int{}
	work, high := 0.0, 0
	for i, j := range jobs {
		profiles[j.Spec.Profile]++
		if !slices.Contains(genTasks, j.Spec.Tasks) || j.Runtime < genRuntimeMin || j.Runtime > genRuntimeMax ||
			j.Runtime%time.Second != 0 || j.Spec.Granularity != genGranularity[j.Spec.Profile] ||
			j.Spec.Workers != (j.Spec.Tasks+15)/16 || j.Spec.TaskResources.Memory.String() != genMemoryPerTask[j.Spec.Profile] {
			t.Fatalf("job %d: %+v", i, j)
		}
		if i > 0 && j.Arrival < jobs[i-1].Arrival {
			t.Fatalf("job %d arrives before job %d", i, i-1)
		}
		if errs := v1alpha1.Validate(j.HPCJob()); len(errs) > 0 {
			t.Fatalf("job %s invalid: %v", j.Name, errs)
		}
		if ptr.Deref(j.Spec.Priority, 0) > 0 {
			high++
		}
		work += float64(j.CPUs()) * j.Runtime.Seconds()
	}
	for _, p := range genProfiles {
		if f := float64(profiles[p]) / n; math.Abs(f-1.0/3) > 0.03 {
			t.Errorf("%s jobs: %.3f of the workload, want about a third", p, f)
		}
	}
	if f := float64(high) / n; math.Abs(f-genHighPriorityP) > 0.02 {
		t.Errorf("high priority: %.3f, want about %v", f, genHighPriorityP)
	}
	offered := work / (float64(cpus) * jobs[n-1].Arrival.Seconds())
	if math.Abs(offered-load) > 0.05 {
		t.Errorf("offered load %.3f, want about %v", offered, load)
	}
}

func TestGenerateMixAndErrors(t *testing.T) {
	jobs, err := Generate(GenOptions{Jobs: 50, Seed: 1, Load: 1, ClusterCPUs: 36, Mix: [3]float64{0, 2, 0}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Spec.Profile != v1alpha1.ProfileMemory {
			t.Fatalf("mix 0,2,0 gave a %s job", j.Spec.Profile)
		}
	}
	batch, err := Generate(GenOptions{Jobs: 50, Seed: 1, Batch: true, ClusterCPUs: 36, Mix: [3]float64{0, 2, 0}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range batch {
		if batch[i].Arrival != 0 || batch[i].Name != jobs[i].Name || batch[i].Runtime != jobs[i].Runtime {
			t.Fatalf("batch job %d: %+v, want %+v arriving at 0", i, batch[i], jobs[i])
		}
	}
	for _, tc := range []struct {
		o    GenOptions
		want string
	}{
		{GenOptions{Jobs: 0, Load: 1, ClusterCPUs: 1, Mix: DefaultMix}, "0 jobs"},
		{GenOptions{Jobs: 1, Load: 0, ClusterCPUs: 1, Mix: DefaultMix}, "load 0"},
		{GenOptions{Jobs: 1, Load: math.NaN(), ClusterCPUs: 1, Mix: DefaultMix}, "load NaN"},
		{GenOptions{Jobs: 1, Load: 1, ClusterCPUs: 0, Mix: DefaultMix}, "cluster of 0 CPUs"},
		{GenOptions{Jobs: 1, Load: 1, ClusterCPUs: 1}, "at least one weight"},
		{GenOptions{Jobs: 1, Load: 1, ClusterCPUs: 1, Mix: [3]float64{1, -1, 0}}, "not negative"},
		{GenOptions{Jobs: 100, Load: 1e-12, ClusterCPUs: 1, Mix: DefaultMix}, "would arrive after"},
	} {
		if _, err := Generate(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}
