package v1alpha1

import (
	"errors"
	"os"
	"strings"
	"testing"
)

const goodJob = `apiVersion: finegrain.dev/v1alpha1
kind: HPCJob
metadata:
  name: lulesh
  namespace: hpc
spec:
  tasks: 16
  profile: memory
  granularity: granularity
  taskResources: {cpu: "1", memory: 2Gi}
  launcher:
    spec:
      containers: [{name: mpirun, image: mpi:latest}]
  worker:
    spec:
      containers: [{name: worker, image: mpi:latest}]
`

func TestDecodeGoodJobIsDefaulted(t *testing.T) {
	job, err := Decode([]byte(goodJob), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if s.Tasks != 16 || s.Profile != ProfileMemory || s.Granularity != GranularityFine ||
		s.Placement != LeastLoaded || s.Gang.TimeoutSeconds != DefaultTimeoutSeconds || s.TaskResources.Memory.String() != "2Gi" {
		t.Errorf("decoded spec = %+v", s)
	}
}

func TestExampleJobDecodes(t *testing.T) {
	data, err := os.ReadFile("../../../../daemonset/placer/example-hpcjob.yaml")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("daemonset/placer/example-hpcjob.yaml not present")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(data, "example-hpcjob.yaml"); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeBadJobs(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           string
	}{
		{"unknown field", "  tasks: 16", "  tsks: 16", `unknown field "spec.tsks"`},
		{"wrong case", "  tasks: 16", "  Tasks: 16", `unknown field "spec.Tasks"`},
		{"duplicate field", "  tasks: 16", "  tasks: 16\n  tasks: 8", `key "tasks" already set`},
		{"wrong type", "  tasks: 16", "  tasks: many", "spec.tasks"},
		{"wrong kind", "kind: HPCJob", "kind: MPIJob", `kind "MPIJob", want apiVersion "finegrain.dev/v1alpha1" kind "HPCJob"`},
		{"zero tasks", "  tasks: 16", "  tasks: 0", "spec.tasks: Invalid value: 0: must be between 1 and 1000000 MPI tasks"},
		{"too many tasks", "  tasks: 16", "  tasks: 2000000", "spec.tasks: Invalid value: 2000000"},
		{"granularity too fine", "  tasks: 16", "  tasks: 20000", "granularity runs one worker per task"},
		{"profile", "profile: memory", "profile: disk", `spec.profile: Unsupported value: "disk": supported values: "cpu", "memory", "network"`},
		{"granularity", "granularity: granularity", "granularity: fine", `spec.granularity: Unsupported value: "fine"`},
		{"placement", "  tasks: 16", "  tasks: 16\n  placement: random", `spec.placement: Unsupported value: "random"`},
		{"fractional cpu", `cpu: "1"`, `cpu: 500m`, `spec.taskResources.cpu: Invalid value: "500m": must be a positive whole number of CPUs`},
		{"missing cpu", `cpu: "1", `, ``, `spec.taskResources.cpu: Required value`},
		{"huge cpu", `cpu: "1"`, `cpu: "2000"`, `must be at most 1024 CPUs per task`},
		{"negative memory", `memory: 2Gi`, `memory: -2Gi`, `spec.taskResources.memory: Invalid value: "-2Gi": must not be negative`},
		{"none without workers", "granularity: granularity", "granularity: none", "spec.workers: Required value"},
		{"more workers than tasks", "  tasks: 16", "  tasks: 16\n  workers: 17", "spec.workers: Invalid value: 17"},
		{"min available", "  tasks: 16", "  tasks: 16\n  gang: {minAvailable: 0}", "spec.gang.minAvailable: Invalid value: 0"},
		{"negative timeout", "  tasks: 16", "  tasks: 16\n  gang: {timeoutSeconds: -1}", "spec.gang.timeoutSeconds: Invalid value: -1"},
		{"no worker containers", "      containers: [{name: worker, image: mpi:latest}]", "      containers: []", "spec.worker.spec.containers: Required value"},
		{"worker node name", "      containers: [{name: worker, image: mpi:latest}]", "      nodeName: n1\n      containers: [{name: worker, image: mpi:latest}]", "spec.worker.spec.nodeName: Forbidden: the placer chooses nodes"},
		{"launcher scheduler", "      containers: [{name: mpirun, image: mpi:latest}]", "      schedulerName: default-scheduler\n      containers: [{name: mpirun, image: mpi:latest}]", "spec.launcher.spec.schedulerName: Forbidden"},
		{"bad name", "  name: lulesh", "  name: Lulesh_1", "metadata.name: Invalid value: \"Lulesh_1\""},
		{"name too long", "  name: lulesh", "  name: " + strings.Repeat("a", 60), "metadata.name: Too long"},
		{"elastic indivisible", "granularity: granularity", "granularity: scale\n  elastic: {minReplicas: 2, maxReplicas: 5}", "must divide tasks (16)"},
		{"elastic min", "granularity: granularity", "granularity: scale\n  elastic: {minReplicas: 0, maxReplicas: 4}", "spec.elastic.minReplicas: Invalid value: 0"},
		{"elastic max below min", "granularity: granularity", "granularity: scale\n  elastic: {minReplicas: 4, maxReplicas: 2}", "spec.elastic.maxReplicas: Invalid value: 2: must be at least minReplicas"},
		{"elastic granularity", "granularity: granularity", "granularity: none\n  elastic: {minReplicas: 2, maxReplicas: 4}", "spec.granularity: Invalid value: \"none\": an elastic job chooses its own worker count"},
		{"elastic with minAvailable", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4}\n  gang: {minAvailable: 2}", "spec.gang.minAvailable: Forbidden"},
		{"hook of both kinds", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {http: {port: 80}, exec: {command: [sh]}}}",
			"spec.elastic.rescaleHook: Invalid value: \"\": set exactly one of http"},
		{"hook of no kind", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {timeoutSeconds: 5}}", "set exactly one of http"},
		{"hook port", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {http: {port: 0}}}", "spec.elastic.rescaleHook.http.port: Invalid value: 0"},
		{"hook path", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {http: {port: 80, path: rescale}}}", "spec.elastic.rescaleHook.http.path: Invalid value: \"rescale\""},
		{"hook command", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {exec: {command: []}}}", "spec.elastic.rescaleHook.exec.command: Required value"},
		{"hook timeout", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {exec: {command: [sh]}, timeoutSeconds: 4000}}", "spec.elastic.rescaleHook.timeoutSeconds: Invalid value: 4000"},
		{"slots indivisible", "granularity: granularity", "granularity: scale\n  slotsPerWorker: 5", "spec.slotsPerWorker: Invalid value: 5: must divide tasks (16)"},
		{"slots above tasks", "granularity: granularity", "granularity: scale\n  slotsPerWorker: 17", "spec.slotsPerWorker: Invalid value: 17: must be between 1 and tasks (16)"},
		{"slots with granularity", "granularity: granularity", "granularity: granularity\n  slotsPerWorker: 4", "spec.granularity: Invalid value: \"granularity\": granularity runs one task per worker"},
		{"slots and workers", "granularity: granularity", "granularity: none\n  workers: 3\n  slotsPerWorker: 4", "spec.workers: Invalid value: 3: with slotsPerWorker 4 the job has 4 workers"},
		{"launcher as worker without slots", "granularity: granularity", "granularity: scale\n  runLauncherAsWorker: true", "spec.slotsPerWorker: Required value: runLauncherAsWorker gives the launcher slotsPerWorker of the tasks"},
		{"launcher as worker alone", "granularity: granularity", "granularity: scale\n  runLauncherAsWorker: true\n  slotsPerWorker: 16", "at least one worker the rest; use at most 8"},
		{"launcher as worker and workers", "granularity: granularity", "granularity: none\n  runLauncherAsWorker: true\n  slotsPerWorker: 4\n  workers: 4", "the job has 3 workers"},
		{"slots elastic", "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4}\n  slotsPerWorker: 4", "spec.slotsPerWorker: Forbidden: an elastic job's workers"},
		{"not yaml", "kind: HPCJob", "kind: [HPCJob", "not valid YAML or JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodJob, tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			_, err := Decode([]byte(strings.Replace(goodJob, tc.old, tc.new, 1)), "job.yaml")
			if err == nil {
				t.Fatal("Decode accepted a bad job")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "job.yaml") && !strings.Contains(err.Error(), "hpc/lulesh") {
				t.Errorf("error %q does not name the job", err)
			}
		})
	}
}

// slotsPerWorker makes workers unnecessary with granularity none.
func TestSlotsPerWorkerWithNone(t *testing.T) {
	job, err := Decode([]byte(strings.Replace(goodJob, "granularity: granularity", "granularity: none\n  slotsPerWorker: 4", 1)), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if MaxWorkersOf(&job.Spec) != 4 {
		t.Errorf("MaxWorkersOf = %d, want tasks/slotsPerWorker = 4", MaxWorkersOf(&job.Spec))
	}
}

func TestRescaleHookDefaults(t *testing.T) {
	job, err := Decode([]byte(strings.Replace(goodJob, "granularity: granularity",
		"elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {http: {port: 8080}}}", 1)), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := job.Spec.Elastic.RescaleHook
	if h.TimeoutSeconds != DefaultRescaleTimeoutSeconds || h.HTTP.Path != DefaultRescalePath || h.HTTP.Port != 8080 {
		t.Errorf("hook %+v %+v, want port 8080, path %s, timeout %d", h, h.HTTP, DefaultRescalePath, DefaultRescaleTimeoutSeconds)
	}
}

func TestInvalidErrorListsEveryProblem(t *testing.T) {
	bad := strings.Replace(strings.Replace(goodJob, "tasks: 16", "tasks: 16\n  placement: random", 1), "profile: memory", "profile: disk", 1)
	_, err := Decode([]byte(bad), "job.yaml")
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *InvalidError", err)
	}
	if len(ie.Errors) != 2 {
		t.Errorf("got %d errors, want 2: %v", len(ie.Errors), ie.Errors)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(goodJob))
	f.Add([]byte(strings.Replace(goodJob, "granularity: granularity", "granularity: scale\n  elastic: {minReplicas: 2, maxReplicas: 4}", 1)))
	f.Add([]byte(strings.Replace(goodJob, "granularity: granularity",
		"elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {http: {port: 8080, path: /r}, timeoutSeconds: 5}}", 1)))
	f.Add([]byte(strings.Replace(goodJob, "granularity: granularity", "elastic: {minReplicas: 2, maxReplicas: 4, rescaleHook: {exec: {command: [sh, -c, cat]}}}", 1)))
	f.Add([]byte(`{"apiVersion":"finegrain.dev/v1alpha1","kind":"HPCJob","metadata":{"name":"x"},"spec":{"tasks":1,"taskResources":{"cpu":"1"},"launcher":{"spec":{"containers":[{"name":"a"}]}},"worker":{"spec":{"containers":[{"name":"b"}]}}}}`))
	f.Add([]byte("kind: HPCJob\nspec: {tasks: -1}"))
	f.Add([]byte("- a\n- b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := Decode(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if errs := Validate(job); len(errs) > 0 {
			t.Fatalf("Decode accepted a job Validate rejects: %v", errs)
		}
		if n := MaxWorkersOf(&job.Spec); n < 1 || n > MaxWorkers {
			t.Fatalf("accepted job expands to %d workers", n)
		}
	})
}
