// Command mpi-entrypoint is the entrypoint of localhost/finegrain-mpi:dev and of users' MPI images
// built on it. Without arguments the container is an MPI worker: the process becomes an sshd that
// accepts only the job's key (see worker.go), or, with FINEGRAIN_SLURM_ROLE set, a virtual
// cluster's slurmctld or Slurm node (see slurm.go). With arguments it runs them, which is how the
// launcher runs the user's command (see launcher.go). Everything it reads from the environment is
// parsed in env.go; images/mpi/README.md documents the contract.
package main

import (
	"fmt"
	"os"
)

func main() {
	code, err := run(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi-entrypoint:", err)
	}
	os.Exit(code)
}

// run starts the worker or the launcher's command and returns the exit status for main. It
// returns only on failure, or when it supervised the command as PID 1 and the command ended.
func run(args []string, getenv func(string) string) (int, error) {
	if _, err := parseImplementation(getenv); err != nil {
		return 2, err
	}
	slurm, isSlurm, err := parseSlurmEnv(getenv)
	if err != nil {
		return 2, err
	}
	if isSlurm && len(args) == 0 {
		return runSlurm(slurm)
	}
	if len(args) == 0 {
		cfg, err := parseWorkerEnv(getenv)
		if err != nil {
			return 2, err
		}
		return 1, startWorker(cfg, defaultWorkerPaths)
	}
	if err := waitForLauncherHostfile(getenv); err != nil {
		fmt.Fprintln(os.Stderr, "mpi-entrypoint:", err)
	}
	return runCommand(args, commandEnv(os.Environ()))
}
