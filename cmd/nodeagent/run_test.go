package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/internal/cli/clitest"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// parseRunFlags runs `nodeagent run args...` with getenv as the environment and returns the
// options the agent would have started with, or the usage error.
func parseRunFlags(args []string, getenv func(string) string) (runOptions, error) {
	var got runOptions
	record := func(o runOptions, _ io.Writer) error { got = o; return nil }
	var stderr strings.Builder
	if code := cli.Execute(newRoot(newRunCommand(getenv, record)), append([]string{"run"}, args...), io.Discard, &stderr); code != 0 {
		return got, fmt.Errorf("exit %d: %s", code, stderr.String())
	}
	return got, nil
}

func TestParseRunFlags(t *testing.T) {
	o, err := parseRunFlags([]string{
		"--reserved-cpus", "0,2", "--min-shared-cpus", "2", "--cgroup-driver", "systemd",
		"--shared-cpu-quota", "request", "--shared-memory-limit", "limit", "--cpu-cfs-period", "50ms",
		"--inotify=false", "--cri-endpoint", "", "--log-format", "text", "--log-level", "debug", "--slurm-confine-interval", "50ms",
	}, env(map[string]string{"NODE_NAME": "node-a"}))
	if err != nil {
		t.Fatal(err)
	}
	a := o.agent
	if a.NodeName != "node-a" || !a.ReservedCPUs.Equals(cpuset.New(0, 2)) || a.MinSharedCPUs != 2 || a.CgroupDriver != cgroup.Systemd ||
		a.Classify.CPUQuota != classify.Request || a.Classify.MemoryLimit != classify.Limit || a.Classify.CPUPeriodUS != 50000 ||
		a.Inotify || a.CRIEndpoint != "" || o.logJSON || o.logLevel != slog.LevelDebug || a.ReconcileInterval != 500*time.Millisecond ||
		a.SlurmConfineInterval != 50*time.Millisecond {
		t.Errorf("parsed %+v", o)
	}
}

func TestParseRunFlagsRejects(t *testing.T) {
	node := env(map[string]string{"NODE_NAME": "n"})
	for _, tc := range []struct {
		args   []string
		getenv func(string) string
		want   string
	}{
		{nil, env(nil), "node name is empty"},
		{[]string{"--reserved-cpus", "0-"}, node, "--reserved-cpus"},
		{[]string{"--shared-cpu-quota", "always"}, node, "--shared-cpu-quota"},
		{[]string{"--cgroup-driver", "docker"}, node, "--cgroup-driver"},
		{[]string{"--cpu-cfs-period", "1500ns"}, node, "--cpu-cfs-period"},
		{[]string{"--min-shared-cpus", "0"}, node, "minimum shared CPUs"},
		{[]string{"--reconcile-interval", "0s"}, node, "reconcile interval"},
		{[]string{"--slurm-confine-interval", "0s"}, node, "Slurm confinement interval 0s must be positive"},
		{[]string{"--log-format", "xml"}, node, "--log-format"},
		{[]string{"extra"}, node, `unexpected argument "extra"`},
		{[]string{"--bogus"}, node, "unknown flag: --bogus"},
		{[]string{"-reserved-cpus", "0"}, node, "-reserved-cpus: long flags take two dashes: --reserved-cpus"},
	} {
		_, err := parseRunFlags(tc.args, tc.getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRunFlags(%q) = %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"run", "--help"}, {"help", "run"}} {
		clitest.Help(t, nodeagent, args,
			"Runs the node agent on this node",
			"Usage:\n  nodeagent run [flags]",
			"--reconcile-interval duration",
			"period of the drift check (default 500ms)",
			"--cgroup-driver string",
			`(default "cgroupfs")`,
			"--log-level LEVEL")
	}
	code, _, errOut := nodeagent("run", "--bogus")
	if code != 2 || !strings.HasPrefix(errOut, "nodeagent run: unknown flag: --bogus\n") || !strings.Contains(errOut, "--reconcile-interval") {
		t.Errorf("run --bogus = %d, %q; want 2, the error and the usage", code, errOut)
	}
}
