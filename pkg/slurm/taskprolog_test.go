package slurm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTaskPrologSettings(t *testing.T) {
	got, err := TaskProlog("/run/it's/slurmd-%n.pid", 1501*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#!/bin/sh\n",
		`slurmd_pid_file='/run/it'\''s/slurmd-'"${SLURMD_NODENAME}"'.pid'` + "\n",
		"timeout_cs=151\n",
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("TaskProlog lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []struct {
		path    string
		timeout time.Duration
		want    string
	}{
		{"run/slurmd.pid", time.Second, "not an absolute path"},
		{"/run/slurmd.pid", 0, "not positive"},
	} {
		if _, err := TaskProlog(bad.path, bad.timeout); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("TaskProlog(%q, %v) = %v, want an error saying %q", bad.path, bad.timeout, err, bad.want)
		}
	}
}

// The script refuses a task that runs where slurmd runs: here this test process plays both
// slurmd (its PID in the PID file) and the task (the script's parent), so it is never confined.
// The refusal comes after the timeout, says why in a line slurmstepd prints to the task's output,
// and exits 1; a PID file that names no process is refused at once.
func TestTaskPrologRefusesUnconfinedTask(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "slurmd-node-a.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	script, err := TaskProlog(filepath.Join(dir, "slurmd-%n.pid"), timeout)
	if err != nil {
		t.Fatal(err)
	}
	prolog := filepath.Join(dir, "task_prolog")
	if err := os.WriteFile(prolog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() (string, time.Duration, error) {
		cmd := exec.Command(prolog)
		// The user's PATH is not the script's.
		cmd.Env = []string{"SLURMD_NODENAME=node-a", "SLURM_JOB_ID=42", "SLURM_STEP_ID=0", "PATH=" + dir}
		start := time.Now()
		out, err := cmd.Output()
		return string(out), time.Since(start), err
	}
	out, took, err := run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("unconfined task: %v (%q), want exit status 1", err, out)
	}
	if took < timeout {
		t.Errorf("refused after %v, before the timeout %v", took, timeout)
	}
	want := "print finegrain TaskProlog: task " + strconv.Itoa(os.Getpid()) + " of job 42 step 0 on node node-a: not confined to its job's placeholder within 0.3 s: its cpuset cgroup is "
	if !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 || !strings.Contains(out, "CAP_SYS_NICE") {
		t.Errorf("output %q, want one line starting %q", out, want)
	}

	if err := os.WriteFile(pidFile, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, took, err = run()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || took >= timeout ||
		!strings.Contains(out, ": cannot find slurmd: no running process named by "+pidFile+"; the task is not started") {
		t.Errorf("without slurmd: %v after %v, %q; want exit status 1 at once, saying slurmd is missing", err, took, out)
	}
}
