// Command placer is finegrain's central placer. `placer run` is the controller the Deployment in
// daemonset/placer runs; `placer plan` is a dry run on files that prints where a job's workers
// would go. Each subcommand lives in its own file as a function from arguments to an exit
// status (0 success, 1 failure, 2 usage error); this file only dispatches.
package main

import (
	"io"
	"os"

	"github.com/finegrain-dev/finegrain/internal/cli"
)

// commands lists the subcommands in the order the usage text shows them.
var commands = []cli.Command{
	{Name: "run", Summary: "run the placer against the cluster (leader-elected)", Run: runRun},
	{Name: "plan", Summary: "plan an HPCJob or a pod group on a cluster snapshot file and print the placements", Run: runPlan},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches to the subcommand named by args[0] and returns the process's exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Dispatch("placer", commands, args, stdout, stderr)
}
