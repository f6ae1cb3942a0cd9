package slurmtest

import (
	"testing"

	"github.com/finegrain-dev/finegrain/internal/threadcaps"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// jobsWithoutCapabilities reads this PID namespace's processes and which Slurm job each runs for
// (slurm.ReadProcesses, slurm.JobProcesses) on a thread without capabilities, as the node agent
// does.
func jobsWithoutCapabilities(t testing.TB) ([]slurm.Process, map[slurm.JobID][]int) {
	t.Helper()
	pids := PIDs(t)
	var procs []slurm.Process
	var jobs map[slurm.JobID][]int
	err := threadcaps.Without(func() error {
		var err error
		procs, err = slurm.ReadProcesses("/proc", pids)
		jobs = slurm.JobProcesses(procs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return procs, jobs
}
