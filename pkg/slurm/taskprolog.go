package slurm

import (
	_ "embed"
	"fmt"
	"strings"
	"time"
)

// DefaultTaskPrologTimeout is how long TaskProlog waits for the node agent to confine a task
// before it refuses to start it. The agent moves a new step's processes at its next reconcile
// tick (500 ms by default), and a process forked while its parent was being moved follows one
// tick later; the rest is room for an agent busy or restarting.
const DefaultTaskPrologTimeout = 30 * time.Second

//go:embed task_prolog.sh
var taskPrologBody string

// TaskProlog is finegrain's TaskProlog script (slurm.conf's TaskProlog, run by slurmstepd in
// each task it forks before it execs the user's program): it waits until the node agent has
// moved the task out of slurmd's cpuset cgroup and CPUs — into its job's pinned placeholder — and
// exits 1 with a message naming the job, the step, the node and both cgroups and CPU lists if
// that has not happened within timeout, so that Slurm does not start the task; no user code of a
// job runs on the node's shared pool (docs/slurm.md, "Confinement", step 4).
//
// slurmdPIDFile is slurm.conf's SlurmdPidFile; a %n in it stands for the node's name, as in
// slurm.conf (the script reads it from SLURMD_NODENAME, which slurmstepd sets for the task).
// timeout is rounded up to hundredths of a second; it must be positive.
func TaskProlog(slurmdPIDFile string, timeout time.Duration) (string, error) {
	if !strings.HasPrefix(slurmdPIDFile, "/") {
		return "", fmt.Errorf("TaskProlog: slurmd's PID file %q is not an absolute path", slurmdPIDFile)
	}
	if timeout <= 0 {
		return "", fmt.Errorf("TaskProlog: timeout %s is not positive", timeout)
	}
	var path []string
	for i, part := range strings.Split(slurmdPIDFile, "%n") {
		if i > 0 {
			path = append(path, `"${SLURMD_NODENAME}"`)
		}
		if part != "" {
			path = append(path, shellQuote(part))
		}
	}
	cs := (timeout + 10*time.Millisecond - 1) / (10 * time.Millisecond)
	return fmt.Sprintf("#!/bin/sh\n# finegrain's TaskProlog, generated (slurm.TaskProlog).\nslurmd_pid_file=%s\ntimeout_cs=%d\n\n%s",
		strings.Join(path, ""), cs, taskPrologBody), nil
}

// shellQuote quotes s for a POSIX shell: in single quotes, each of its single quotes closed,
// escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
