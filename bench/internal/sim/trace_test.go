package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func testdataFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "simulator", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeTraceFormats(t *testing.T) {
	yamlJobs, err := DecodeTrace(testdataFile(t, "mixed-24.yaml"), "mixed-24.yaml")
	if err != nil {
		t.Fatal(err)
	}
	csvJobs, err := DecodeCSV(bytes.NewReader(testdataFile(t, "mixed-24.csv")), "mixed-24.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(yamlJobs) != 24 {
		t.Fatalf("%d jobs, want 24", len(yamlJobs))
	}
	if diff := cmp.Diff(yamlJobs, csvJobs); diff != "" {
		t.Errorf("YAML and CSV of the same workload differ (-yaml +csv):\n%s", diff)
	}
	jobs := readTestTrace(t, "e2e-4jobs.yaml")
	want := Job{Name: "c", Arrival: 20 * time.Second, Runtime: 30 * time.Second, Spec: v1alpha1.HPCJobSpec{
		Tasks: 6, Profile: v1alpha1.ProfileCPU, Granularity: v1alpha1.GranularityNone, Workers: 2,
		TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
		Priority:      ptr.To[int32](0),
		Placement:     v1alpha1.LeastLoaded, Gang: v1alpha1.GangPolicy{TimeoutSeconds: v1alpha1.DefaultTimeoutSeconds},
		MPIImplementation: v1alpha1.OpenMPI, SSHAuthMountPath: v1alpha1.DefaultSSHAuthMountPath,
		LauncherCreationPolicy: v1alpha1.WaitForWorkersReady, RunPolicy: v1alpha1.RunPolicy{CleanPodPolicy: v1alpha1.CleanPodPolicyRunning},
	}}
	if diff := cmp.Diff(want, jobs[2]); diff != "" {
		t.Errorf("job c (-want +got):\n%s", diff)
	}
	js := `{"jobs":[{"arrival":"1m30s","runtime":2.5,"tasks":2,"taskResources":{"cpu":"1"}},{"arrival":0,"runtime":"1h","tasks":1,"taskResources":{"cpu":"2"},"gang":{"timeoutSeconds":60}}]}`
	jobs, err = DecodeTrace([]byte(js), "inline")
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Name != "job-2" || jobs[0].Spec.Gang.TimeoutSeconds != 60 || jobs[1].Name != "job-1" ||
		jobs[1].Arrival != 90*time.Second || jobs[1].Runtime != 2500*time.Millisecond || jobs[0].CPUs() != 2 {
		t.Errorf("JSON trace, sorted by arrival: %+v", jobs)
	}
}

func TestTraceRoundTrip(t *testing.T) {
	jobs := generated(t, 50, 144, 5, 0.5)
	jobs[3].Spec.ExclusiveNodes = true
	jobs[4].Spec.Gang.TimeoutSeconds = 30
	out, err := EncodeTrace(jobs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeTrace(out, "encoded")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, back); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := EncodeCSV(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	back, err = DecodeCSV(&buf, "encoded.csv")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, back); diff != "" {
		t.Errorf("CSV round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeTraceBadInput(t *testing.T) {
	job := func(fields string) string {
		return "jobs:\n- {name: j1, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 1}}\n- {" + fields + "}\n"
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"jobs: []", "no jobs"},
		{"jobs: {}", "traceFile.jobs of type []sim.traceJob"},
		{"[", "not valid YAML"},
		{"jobz: []", `unknown field "jobz"`},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 1}, color: red"), `unknown field "jobs[1].color"`},
		{job("name: j2, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), "job j2 (jobs[1]): arrival is required"},
		{job("name: j2, arrival: 0, tasks: 4, taskResources: {cpu: 1}"), "job j2 (jobs[1]): runtime is required"},
		{job("name: j2, arrival: 0, runtime: 0, tasks: 4, taskResources: {cpu: 1}"), "job j2 (jobs[1]): runtime must be positive"},
		{job("name: j2, arrival: -3, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), `"-3" seconds: must be between 0`},
		{job("name: j2, arrival: soon, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), `"soon" is neither seconds`},
		{job("name: j2, arrival: .nan, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), "unsupported value: NaN"},
		{job("name: j2, arrival: 1e30, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), "must be between 0 and"},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 0, taskResources: {cpu: 1}"), "job j2 (jobs[1]): spec.tasks: Invalid value: 0"},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 4, profile: gpu, taskResources: {cpu: 1}"), `job j2 (jobs[1]): spec.profile: Unsupported value: "gpu"`},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 500m}"), "job j2 (jobs[1]): spec.taskResources.cpu"},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 4, granularity: none, taskResources: {cpu: 1}"), "job j2 (jobs[1]): spec.workers: Required"},
		{job("name: J_2, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), "job J_2 (jobs[1]): metadata.name"},
		{job("name: j2, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 1}, gang: {minAvailable: 2}"), `unknown field "jobs[1].gang.minAvailable"`},
		{job("name: j1, arrival: 0, runtime: 10, tasks: 4, taskResources: {cpu: 1}"), "job j1 (jobs[1]): name already used by jobs[0]"},
		{job("arrival: 0, runtime: 10, tasks: four, taskResources: {cpu: 1}"), "cannot unmarshal string into Go struct field traceJob.jobs.tasks"},
	} {
		if _, err := DecodeTrace([]byte(tc.in), "t.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\nerror %v\nwant it to mention %q", tc.in, err, tc.want)
		}
	}
}

func TestDecodeCSVBadInput(t *testing.T) {
	const header = "name,arrival,runtime,tasks,cpu\n"
	for _, tc := range []struct{ in, want string }{
		{"", "empty; want a header"},
		{"# only a comment\n", "empty; want a header"},
		{header, "no jobs after the header"},
		{"name,arrival,runtime,tasks,cpu,colour\n", `header column 6 "colour" is not one of`},
		{"name,arrival,arrival,runtime,tasks,cpu\n", `names column "arrival" twice`},
		{"name,arrival,tasks,cpu\n", `lacks the required column "runtime"`},
		{header + "j1,0,10,4,1\nj2,0,ten,4,1\n", "t.csv line 3 (job j2): column runtime"},
		{header + "j1,0,10,4.5,1\n", `line 2 (job j1): column tasks: "4.5" is not a whole number`},
		{header + ",0,10,4,x\n", `line 2 (job job-1): column cpu: "x" is not a quantity`},
		{header + "j1,0,10,4,1,extra\n", "record on line 2: wrong number of fields"},
		{"name,arrival,runtime,tasks,cpu,exclusiveNodes\nj1,0,10,4,1,maybe\n", `column exclusiveNodes: "maybe" is not true or false`},
		{header + "j1,0,10,0,1\n", "t.csv line 2: job j1 (jobs[0]): spec.tasks"},
		{header + "j1,0,10,4,1\nj1,5,10,4,1\n", "job j1 (jobs[1]): name already used"},
		{header + "j1,0,10,4,1\n\"unterminated\n", "parse error on line 3"},
	} {
		if _, err := DecodeCSV(strings.NewReader(tc.in), "t.csv"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\nerror %v\nwant it to mention %q", tc.in, err, tc.want)
		}
	}
}

// checkDecoded holds for every trace a decoder accepts: jobs ordered by arrival, unique names,
// positive runtimes within bounds, valid specs, and the same jobs after writing and reading
// them again.
func checkDecoded(t *testing.T, jobs []Job) {
	names := map[string]bool{}
	for i := range jobs {
		j := &jobs[i]
		if i > 0 && j.Arrival < jobs[i-1].Arrival {
			t.Fatalf("job %s arrives before the job ahead of it", j.Name)
		}
		if names[j.Name] || j.Runtime <= 0 || j.Runtime > MaxDuration || j.Arrival < 0 || j.Arrival > MaxDuration {
			t.Fatalf("job %+v accepted", j)
		}
		names[j.Name] = true
		if errs := v1alpha1.Validate(j.HPCJob()); len(errs) > 0 {
			t.Fatalf("job %s accepted though invalid: %v", j.Name, errs)
		}
	}
	out, err := EncodeTrace(jobs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeTrace(out, "re-encoded")
	if err != nil {
		t.Fatalf("re-encoded trace is refused: %v", err)
	}
	if len(back) != len(jobs) {
		t.Fatalf("%d jobs, %d after re-encoding", len(jobs), len(back))
	}
}

func FuzzDecodeTrace(f *testing.F) {
	f.Add(testdataFile(f, "e2e-4jobs.yaml"))
	f.Add(testdataFile(f, "mixed-24.yaml"))
	f.Add([]byte(`{"jobs":[{"arrival":"1m","runtime":1,"tasks":1,"taskResources":{"cpu":"1"}}]}`))
	f.Add([]byte("jobs:\n- {arrival: 0, runtime: 1e-9, tasks: 3, granularity: none, workers: 2, taskResources: {cpu: 1, memory: 1Ki}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := DecodeTrace(data, "fuzz")
		if err != nil {
			return
		}
		checkDecoded(t, jobs)
	})
}

func FuzzDecodeCSV(f *testing.F) {
	f.Add(testdataFile(f, "mixed-24.csv"))
	f.Add([]byte("arrival,runtime,tasks,cpu\n0,1,1,1\n"))
	f.Add([]byte("name,arrival,runtime,tasks,cpu,granularity,workers\nx,1m,2h,4,2,none,3\n# c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := DecodeCSV(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			return
		}
		checkDecoded(t, jobs)
	})
}
