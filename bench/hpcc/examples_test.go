package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
	v1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// examples are the HPCC jobs in examples/, one per benchmark of the paper, with the profile and
// granularity the paper gives it, and the MPICH variant of EP-DGEMM.
var examples = map[string]struct {
	profile     v1alpha1.Profile
	granularity v1alpha1.Granularity
	mpi         v1alpha1.MPIImplementation
}{
	"hpcc-ep-dgemm.yaml":     {v1alpha1.ProfileCPU, v1alpha1.GranularityFine, v1alpha1.OpenMPI},
	"hpcc-ep-stream.yaml":    {v1alpha1.ProfileMemory, v1alpha1.GranularityScale, v1alpha1.OpenMPI},
	"hpcc-g-randomring.yaml": {v1alpha1.ProfileNetwork, v1alpha1.GranularityScale, v1alpha1.OpenMPI},
	"hpcc-g-fft.yaml":        {v1alpha1.ProfileNetwork, v1alpha1.GranularityScale, v1alpha1.OpenMPI},
	"hpcc-mpich.yaml":        {v1alpha1.ProfileCPU, v1alpha1.GranularityFine, v1alpha1.MPICH},
}

const examplesDir = "../../examples"

func TestExamplesAreTheSet(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(examplesDir, "hpcc-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, p := range paths {
		got = append(got, filepath.Base(p))
	}
	for name := range examples {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("examples/hpcc-*.yaml = %v, want %v (add a new example to this test)", got, want)
	}
}

// TestExamplesAreGenerated: each example's hpccinf.txt is what `make hpcc-examples` writes for
// its HPCJob, so the two never drift apart.
func TestExamplesAreGenerated(t *testing.T) {
	for name := range examples {
		path := filepath.Join(examplesDir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := updateExample(data, path)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(data) {
			t.Errorf("examples/%s is stale: run make hpcc-examples (go run ./bench/hpcc inf -update examples/hpcc-*.yaml)", name)
		}
	}
}

// TestExamplesDecode: every example is an HPCJob the placer accepts, read strictly as the placer
// reads a job (v1alpha1.Decode), with the paper's shape, an hpccinf.txt whose P×Q is its task
// count, mounted where HPCC's rank 0 reads it, and a launcher that starts that many ranks with
// the image's mpirun (Open MPI's or MPICH's, as FINEGRAIN_MPI_IMPLEMENTATION from the placer
// says) and prints hpccoutf.txt.
func TestExamplesDecode(t *testing.T) {
	for name, want := range examples {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(examplesDir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, _, cm, err := splitExample(data, path)
			if err != nil {
				t.Fatal(err)
			}
			job, err := v1alpha1.Decode(f.job.data, path)
			if err != nil {
				t.Fatal(err)
			}
			s := job.Spec
			if s.Profile != want.profile || s.Granularity != want.granularity || s.MPIImplementation != want.mpi {
				t.Errorf("profile %s, granularity %s, MPI %s; want %s, %s, %s", s.Profile, s.Granularity, s.MPIImplementation, want.profile, want.granularity, want.mpi)
			}
			if s.Tasks != 16 || s.TaskResources.Memory.String() != "1Gi" {
				t.Errorf("tasks %d × %s; the paper's jobs have 16 tasks, the examples 1Gi each", s.Tasks, s.TaskResources.Memory.String())
			}

			in, err := hpcc.ReadInput(strings.NewReader(cm.Data[infKey]))
			if err != nil {
				t.Fatalf("ConfigMap %s: %v", cm.Name, err)
			}
			if in.Grid.P*in.Grid.Q != int(s.Tasks) {
				t.Errorf("hpccinf.txt grid %d×%d for %d tasks", in.Grid.P, in.Grid.Q, s.Tasks)
			}

			checkMount(t, job, cm.Name)
			cmd := strings.Join(job.Spec.Launcher.Spec.Containers[0].Args, " ")
			for _, part := range []string{
				fmt.Sprintf("mpirun -n %d hpcc && ", s.Tasks),
				fmt.Sprintf("ssh %s.%s cat /root/hpccoutf.txt", v1alpha1.WorkerName(job.Name, 0), v1alpha1.ServiceName(job.Name)),
			} {
				if !strings.Contains(cmd, part) {
					t.Errorf("launcher command %q lacks %q", cmd, part)
				}
			}
		})
	}
}

// checkMount: the worker's first container mounts the ConfigMap's hpccinf.txt at
// /root/hpccinf.txt, the working directory of the image, where HPCC's rank 0 reads it.
func checkMount(t *testing.T, job *v1alpha1.HPCJob, configMap string) {
	t.Helper()
	pod := job.Spec.Worker.Spec
	volume := ""
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap {
			volume = v.Name
		}
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == volume && m.MountPath == "/root/hpccinf.txt" && m.SubPath == infKey {
			return
		}
	}
	t.Errorf("the worker does not mount ConfigMap %s's %s at /root/hpccinf.txt (volume %q)", configMap, infKey, volume)
}

// The demo's job (make demo) is generated and checked like an example: one task, the ConfigMap
// mounted where rank 0 reads it.
func TestDemoJobIsGenerated(t *testing.T) {
	const path = "../../hack/cluster/demo/hpcjob.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := updateExample(data, path)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(data) {
		t.Errorf("%s is stale: run make hpcc-examples", path)
	}
	f, _, cm, err := splitExample(data, path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := v1alpha1.Decode(f.job.data, path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := hpcc.ReadInput(strings.NewReader(cm.Data[infKey]))
	if err != nil || in.Grid.P*in.Grid.Q != int(job.Spec.Tasks) {
		t.Errorf("hpccinf.txt grid %+v for %d tasks (%v)", in.Grid, job.Spec.Tasks, err)
	}
	checkMount(t, job, cm.Name)
}
