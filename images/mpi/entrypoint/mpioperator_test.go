package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// MPI Operator's launcher gets the host-key options after the operator's own ssh options, under
// the name its MPI reads, and an MPICH launcher runs MPICH's mpirun; its workers, finegrain's
// launchers and anything else run with the environment as it is.
func TestCommandEnv(t *testing.T) {
	const operatorArgs = "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10"
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{
			name: "MPI Operator launcher",
			env:  []string{"PATH=/usr/bin", "K_MPI_JOB_ROLE=launcher", operatorArgs, "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile"},
			want: []string{"PATH=/usr/bin", "K_MPI_JOB_ROLE=launcher",
				"OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes",
				"OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile"},
		},
		{
			name: "MPI Operator launcher with empty ssh options",
			env:  []string{"OMPI_MCA_plm_rsh_args=", "K_MPI_JOB_ROLE=launcher"},
			want: []string{"OMPI_MCA_plm_rsh_args=-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes", "K_MPI_JOB_ROLE=launcher"},
		},
		{
			name: "MPI Operator launcher of Intel MPI",
			env:  []string{"K_MPI_JOB_ROLE=launcher", "I_MPI_HYDRA_HOST_FILE=/etc/mpi/hostfile", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=-o ConnectionAttempts=10"},
			want: []string{"K_MPI_JOB_ROLE=launcher", "I_MPI_HYDRA_HOST_FILE=/etc/mpi/hostfile", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=-o ConnectionAttempts=10"},
		},
		{
			name: "MPI Operator launcher of MPICH",
			env:  []string{"PATH=/usr/bin", "K_MPI_JOB_ROLE=launcher", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10"},
			want: []string{"PATH=/usr/bin", "K_MPI_JOB_ROLE=launcher", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10",
				"HYDRA_LAUNCHER_EXTRA_ARGS=-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes",
				"FINEGRAIN_MPI_IMPLEMENTATION=MPICH"},
		},
		{
			name: "MPI Operator launcher of MPICH whose template set Hydra's options and the MPI",
			env: []string{"FINEGRAIN_MPI_IMPLEMENTATION=MPICH", "HYDRA_LAUNCHER_EXTRA_ARGS=-p 2222", "K_MPI_JOB_ROLE=launcher",
				"HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10"},
			want: []string{"FINEGRAIN_MPI_IMPLEMENTATION=MPICH",
				"HYDRA_LAUNCHER_EXTRA_ARGS=-p 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes",
				"K_MPI_JOB_ROLE=launcher", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10"},
		},
		{
			name: "MPI Operator launcher of MPICH without ssh options, Open MPI named by its template",
			env:  []string{"K_MPI_JOB_ROLE=launcher", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "FINEGRAIN_MPI_IMPLEMENTATION=OpenMPI"},
			want: []string{"K_MPI_JOB_ROLE=launcher", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "FINEGRAIN_MPI_IMPLEMENTATION=OpenMPI",
				"HYDRA_LAUNCHER_EXTRA_ARGS=-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes"},
		},
		{
			name: "MPI Operator worker of MPICH",
			env:  []string{"K_MPI_JOB_ROLE=worker", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10"},
			want: []string{"K_MPI_JOB_ROLE=worker", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10"},
		},
		{
			name: "finegrain MPICH launcher",
			env: []string{"FINEGRAIN_MPI_IMPLEMENTATION=MPICH", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCHER=ssh",
				"HYDRA_LAUNCHER_EXTRA_ARGS=-F /root/.ssh/config -o ConnectionAttempts=10"},
			want: []string{"FINEGRAIN_MPI_IMPLEMENTATION=MPICH", "HYDRA_HOST_FILE=/etc/mpi/hostfile", "HYDRA_LAUNCHER=ssh",
				"HYDRA_LAUNCHER_EXTRA_ARGS=-F /root/.ssh/config -o ConnectionAttempts=10"},
		},
		{
			name: "MPI Operator worker",
			env:  []string{"K_MPI_JOB_ROLE=worker", operatorArgs},
			want: []string{"K_MPI_JOB_ROLE=worker", operatorArgs},
		},
		{
			name: "finegrain launcher",
			env:  []string{"OMPI_MCA_plm_rsh_args=-F /root/.ssh/config -o ConnectionAttempts=10"},
			want: []string{"OMPI_MCA_plm_rsh_args=-F /root/.ssh/config -o ConnectionAttempts=10"},
		},
		{
			name: "role as a prefix of another variable",
			env:  []string{"K_MPI_JOB_ROLE_X=launcher", operatorArgs},
			want: []string{"K_MPI_JOB_ROLE_X=launcher", operatorArgs},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.env...)
			if diff := cmp.Diff(tc.want, commandEnv(in)); diff != "" {
				t.Errorf("commandEnv (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.env, in); diff != "" {
				t.Errorf("commandEnv changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestHostfileNames(t *testing.T) {
	cases := map[string][]string{
		"pi-worker-0.pi.ml.svc slots=1\npi-worker-1.pi.ml.svc slots=1\n": {"pi-worker-0.pi.ml.svc", "pi-worker-1.pi.ml.svc"},
		"pi-launcher.pi.ml.svc:2\npi-worker-0.pi.ml.svc:2\n":             {"pi-launcher.pi.ml.svc", "pi-worker-0.pi.ml.svc"},
		"# written by MPI Operator\n\n  w0 slots=4 # first\n\tw1\n":      {"w0", "w1"},
		"": nil,
	}
	for data, want := range cases {
		if diff := cmp.Diff(want, hostfileNames(data)); diff != "" {
			t.Errorf("hostfileNames(%q) (-want +got):\n%s", data, diff)
		}
	}
}

// fakeResolver resolves a name once it has been asked about it after more than its count of
// earlier failures.
type fakeResolver struct {
	failures map[string]int
	asked    []string
}

func (r *fakeResolver) lookup(_ context.Context, name string) ([]string, error) {
	r.asked = append(r.asked, name)
	if r.failures[name] > 0 {
		r.failures[name]--
		return nil, errors.New("no such host")
	}
	return []string{"198.18.1.2"}, nil
}

func TestWaitForHostfile(t *testing.T) {
	dir := t.TempDir()
	hostfile := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(hostfile, []byte("w0.pi.ml.svc slots=1\nw1.pi.ml.svc slots=1\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	launcher := map[string]string{"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": hostfile}

	// The names that do not resolve yet are asked again until they do; the wait is said once.
	r := &fakeResolver{failures: map[string]int{"w1.pi.ml.svc": 2}}
	var log strings.Builder
	if err := waitForHostfile(context.Background(), envOf(launcher), "pi-launcher", r.lookup, time.Millisecond, &log); err != nil {
		t.Fatal(err)
	}
	if want := []string{"w0.pi.ml.svc", "w1.pi.ml.svc", "w1.pi.ml.svc", "w1.pi.ml.svc"}; !cmp.Equal(r.asked, want) {
		t.Errorf("asked %q, want %q", r.asked, want)
	}
	if want := "mpi-entrypoint: waiting for the names of " + hostfile + " to resolve (the job's pods are starting): w1.pi.ml.svc\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}

	// Past the deadline the error names what still does not resolve.
	ctx, cancel := context.WithTimeoutCause(context.Background(), 20*time.Millisecond, errors.New("waited 20ms"))
	defer cancel()
	r = &fakeResolver{failures: map[string]int{"w0.pi.ml.svc": 1 << 30}}
	err := waitForHostfile(ctx, envOf(launcher), "pi-launcher", r.lookup, time.Millisecond, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "names of "+hostfile+" still do not resolve: w0.pi.ml.svc (waited 20ms)") {
		t.Errorf("error %v, want one naming w0.pi.ml.svc and the wait", err)
	}

	// Hydra's variable names the hostfile too, and MPICH's launcher waits for its own name, as
	// the hostfile spells names, until the cluster's DNS has it. A missing hostfile is an error.
	r = &fakeResolver{failures: map[string]int{"pi-launcher.pi.ml.svc": 1}}
	hydra := map[string]string{"K_MPI_JOB_ROLE": "launcher", "HYDRA_HOST_FILE": hostfile}
	if err := waitForHostfile(context.Background(), envOf(hydra), "pi-launcher", r.lookup, time.Millisecond, &strings.Builder{}); err != nil {
		t.Errorf("Hydra's hostfile: %v", err)
	}
	if want := []string{"w0.pi.ml.svc", "w1.pi.ml.svc", "pi-launcher.pi.ml.svc", "pi-launcher.pi.ml.svc"}; !cmp.Equal(r.asked, want) {
		t.Errorf("Hydra's hostfile: asked %q, want %q", r.asked, want)
	}
	r = &fakeResolver{}
	openMPI := map[string]string{"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": hostfile}
	if err := waitForHostfile(context.Background(), envOf(openMPI), "pi-launcher", r.lookup, time.Millisecond, &strings.Builder{}); err != nil || len(r.asked) != 2 {
		t.Errorf("Open MPI's launcher asked %q (%v); want the 2 workers only: its ranks do not call it back by name", r.asked, err)
	}
	missing := map[string]string{"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": filepath.Join(dir, "none")}
	if err := waitForHostfile(context.Background(), envOf(missing), "pi-launcher", r.lookup, time.Millisecond, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "read the hostfile MPI Operator named") {
		t.Errorf("missing hostfile: %v", err)
	}

	// Workers, finegrain's launchers and launchers without a hostfile do not wait.
	for _, env := range []map[string]string{
		{"K_MPI_JOB_ROLE": "worker", "OMPI_MCA_orte_default_hostfile": hostfile},
		{"OMPI_MCA_orte_default_hostfile": hostfile},
		{"K_MPI_JOB_ROLE": "launcher"},
	} {
		r = &fakeResolver{}
		if err := waitForHostfile(context.Background(), envOf(env), "pi-launcher", r.lookup, time.Millisecond, &strings.Builder{}); err != nil || len(r.asked) != 0 {
			t.Errorf("environment %v: %v, asked %q", env, err, r.asked)
		}
	}
}

// Whatever the hostfile holds, every name is one non-empty word without the separators of the
// formats, and there is at most one per line.
func TestLauncherName(t *testing.T) {
	cases := []struct {
		workers []string
		host    string
		want    string
	}{
		{[]string{"pi-worker-0.pi.ml.svc", "pi-worker-1.pi.ml.svc"}, "pi-launcher", "pi-launcher.pi.ml.svc"},
		{[]string{"pi-worker-0.pi.ml.svc.example.org"}, "pi-launcher", "pi-launcher.pi.ml.svc.example.org"},
		{[]string{"pi-worker-0.pi.ml.svc"}, "", ""},
		{[]string{"w0", "w1.pi.ml.svc"}, "pi-launcher", ""},
		{[]string{"w0."}, "pi-launcher", ""},
		{nil, "pi-launcher", ""},
	}
	for _, tc := range cases {
		if got := launcherName(tc.workers, tc.host); got != tc.want {
			t.Errorf("launcherName(%q, %q) = %q, want %q", tc.workers, tc.host, got, tc.want)
		}
	}
}

func FuzzHostfileNames(f *testing.F) {
	f.Add("pi-worker-0.pi.ml.svc slots=1\npi-worker-1.pi.ml.svc slots=1\n")
	f.Add("w0:2\n# comment\n\n w1 \n")
	f.Fuzz(func(t *testing.T, data string) {
		names := hostfileNames(data)
		if len(names) > strings.Count(data, "\n")+1 {
			t.Fatalf("%d names from %d lines", len(names), strings.Count(data, "\n")+1)
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, ":# \t\n\v\f\r") {
				t.Fatalf("name %q from %q", n, data)
			}
		}
	})
}
