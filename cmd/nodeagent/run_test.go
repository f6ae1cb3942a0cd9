package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseRunFlags(t *testing.T) {
	o, err := parseRunFlags([]string{
		"--reserved-cpus", "0,2", "--min-shared-cpus", "2", "--cgroup-driver", "systemd",
		"--shared-cpu-quota", "request", "--shared-memory-limit", "limit", "--cpu-cfs-period", "50ms",
		"--inotify=false", "--cri-endpoint", "", "--log-format", "text", "--log-level", "debug",
	}, io.Discard, env(map[string]string{"NODE_NAME": "node-a"}))
	if err != nil {
		t.Fatal(err)
	}
	a := o.agent
	if a.NodeName != "node-a" || !a.ReservedCPUs.Equals(cpuset.New(0, 2)) || a.MinSharedCPUs != 2 || a.CgroupDriver != cgroup.Systemd ||
		a.Classify.CPUQuota != classify.Request || a.Classify.MemoryLimit != classify.Limit || a.Classify.CPUPeriodUS != 50000 ||
		a.Inotify || a.CRIEndpoint != "" || o.logJSON || a.ReconcileInterval != 500*time.Millisecond {
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
		{[]string{"--log-format", "xml"}, node, "--log-format"},
		{[]string{"extra"}, node, "unexpected argument"},
	} {
		_, err := parseRunFlags(tc.args, io.Discard, tc.getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRunFlags(%q) = %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}

func TestRunUsage(t *testing.T) {
	var out strings.Builder
	if code := runRun([]string{"-h"}, io.Discard, &out); code != 2 || !strings.Contains(out.String(), "--reconcile-interval") && !strings.Contains(out.String(), "-reconcile-interval") {
		t.Errorf("run -h = %d\n%s", code, out.String())
	}
	if code := runRun([]string{"--bogus"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("run --bogus = %d, want 2", code)
	}
}
