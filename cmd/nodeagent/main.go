// Command nodeagent is finegrain's node agent and its inspection tools. Every subcommand lives in
// its own file as a cobra command whose flags fill an options struct; this file only assembles
// them, and internal/cli turns the outcome into the exit status (0 success, 1 failure, 2 usage
// error).
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
	return cli.Execute(newRoot(newRunCommand(os.Getenv, runAgent)), args, stdout, stderr)
}

// newRoot assembles the program around runCmd, `nodeagent run` (tests give one that only
// records its options); the other subcommands follow in the order the usage text shows them.
func newRoot(runCmd *cobra.Command) *cobra.Command {
	return cli.NewRoot("nodeagent", "finegrain's node agent and its inspection tools",
		"nodeagent pins the containers of opted-in pods to exclusive cores of one NUMA node and keeps every\n"+
			"other container in the shared pool (run, normally as the finegrain DaemonSet); its other commands\n"+
			"show the machine, what the allocator would do, and who holds which CPUs.",
		runCmd, newTopologyCommand(), newSimulateCommand(), newPinsCommand())
}
