package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseWorkerEnv(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		want  workerConfig
		wants string // part of the error; empty for success
	}{
		{name: "defaults", env: nil, want: workerConfig{Port: 22, AuthDir: "/root/.ssh"}},
		{name: "placer's values", env: map[string]string{"FINEGRAIN_SSH_PORT": "2222", "FINEGRAIN_SSH_AUTH_DIR": "/etc/finegrain/ssh"}, want: workerConfig{Port: 2222, AuthDir: "/etc/finegrain/ssh"}},
		{name: "highest port", env: map[string]string{"FINEGRAIN_SSH_PORT": "65535"}, want: workerConfig{Port: 65535, AuthDir: "/root/.ssh"}},
		{name: "trailing slash", env: map[string]string{"FINEGRAIN_SSH_AUTH_DIR": "/mnt/ssh/"}, want: workerConfig{Port: 22, AuthDir: "/mnt/ssh"}},
		{name: "port zero", env: map[string]string{"FINEGRAIN_SSH_PORT": "0"}, wants: `FINEGRAIN_SSH_PORT="0" is not a TCP port number (1-65535)`},
		{name: "port too high", env: map[string]string{"FINEGRAIN_SSH_PORT": "65536"}, wants: `FINEGRAIN_SSH_PORT="65536" is not a TCP port number`},
		{name: "port negative", env: map[string]string{"FINEGRAIN_SSH_PORT": "-22"}, wants: `FINEGRAIN_SSH_PORT="-22"`},
		{name: "port with sign", env: map[string]string{"FINEGRAIN_SSH_PORT": "+22"}, wants: `FINEGRAIN_SSH_PORT="+22"`},
		{name: "port not a number", env: map[string]string{"FINEGRAIN_SSH_PORT": "ssh"}, wants: "leave it unset for 22"},
		{name: "port with space", env: map[string]string{"FINEGRAIN_SSH_PORT": " 22"}, wants: `FINEGRAIN_SSH_PORT=" 22"`},
		{name: "relative dir", env: map[string]string{"FINEGRAIN_SSH_AUTH_DIR": "ssh"}, wants: `FINEGRAIN_SSH_AUTH_DIR="ssh" must be an absolute directory path`},
		{name: "dir with space", env: map[string]string{"FINEGRAIN_SSH_AUTH_DIR": "/mnt/my keys"}, wants: "without spaces, quotes or %"},
		{name: "dir with token", env: map[string]string{"FINEGRAIN_SSH_AUTH_DIR": "/home/%u/.ssh"}, wants: "without spaces, quotes or %"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWorkerEnv(envOf(tc.env))
			if tc.wants != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wants) {
					t.Fatalf("parseWorkerEnv error = %v, want one containing %q", err, tc.wants)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseWorkerEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseImplementation(t *testing.T) {
	for value, want := range map[string]Implementation{"": OpenMPI, "OpenMPI": OpenMPI, "MPICH": MPICH} {
		got, err := parseImplementation(envOf(map[string]string{"FINEGRAIN_MPI_IMPLEMENTATION": value}))
		if err != nil || got != want {
			t.Errorf("FINEGRAIN_MPI_IMPLEMENTATION=%q: got %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"openmpi", "mpich", "IntelMPI", " MPICH"} {
		_, err := parseImplementation(envOf(map[string]string{"FINEGRAIN_MPI_IMPLEMENTATION": value}))
		if err == nil || !strings.Contains(err.Error(), "set it to OpenMPI or MPICH") {
			t.Errorf("FINEGRAIN_MPI_IMPLEMENTATION=%q: error = %v, want one naming the two choices", value, err)
		}
	}
}

func TestRunRejectsBadEnvironmentBeforeStarting(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		wants string
	}{
		{"worker with bad port", nil, map[string]string{"FINEGRAIN_SSH_PORT": "abc"}, "FINEGRAIN_SSH_PORT"},
		{"worker with unknown MPI", nil, map[string]string{"FINEGRAIN_MPI_IMPLEMENTATION": "LAM"}, "FINEGRAIN_MPI_IMPLEMENTATION"},
		{"launcher with unknown MPI", []string{"true"}, map[string]string{"FINEGRAIN_MPI_IMPLEMENTATION": "LAM"}, "FINEGRAIN_MPI_IMPLEMENTATION"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, err := run(tc.args, envOf(tc.env))
			if code != 2 || err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("run = %d, %v; want status 2 and an error naming %s", code, err, tc.wants)
			}
		})
	}
}
