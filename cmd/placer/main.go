// Command placer is finegrain's central placer. `placer run` is the controller the Deployment in
// daemonset/placer runs; `placer plan` is a dry run on files that prints where a job's workers
// would go. Each subcommand lives in its own file as a cobra command whose flags fill an options
// struct; this file only assembles them, and internal/cli turns the outcome into the exit status
// (0 success, 1 failure, 2 usage error).
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs the command line and returns the process's exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(newRunCommand(runPlacer)), args, stdout, stderr)
}

// newRoot assembles the program around runCmd, `placer run` (tests give one that only records
// its options).
func newRoot(runCmd *cobra.Command) *cobra.Command {
	return cli.NewRoot("placer", "finegrain's central placer",
		"The placer binds the pods of HPCJobs and pod gangs that name schedulerName finegrain-placer to\n"+
			"nodes and NUMA nodes with the free cores the node agents publish (run, normally as the\n"+
			"finegrain-placer Deployment); plan shows where a job would go on a cluster snapshot file.",
		runCmd, newPlanCommand())
}
