// Command nodeagent is finegrain's node agent and its inspection tools. Every subcommand lives in
// its own file as a function from arguments to an exit status (0 success, 1 failure, 2 usage
// error); this file only dispatches, so adding a subcommand is one line in commands plus its file.
package main

import (
	"io"
	"os"

	"github.com/finegrain-dev/finegrain/internal/cli"
)

// commands lists the subcommands in the order the usage text shows them.
var commands = []cli.Command{
	{Name: "run", Summary: "run the node agent: pin opted-in containers, keep the rest in the shared pool, repair drift", Run: runRun},
	{Name: "topology", Summary: "print the machine's sockets, NUMA nodes, L3 groups and cores (table or JSON)", Run: runTopology},
	{Name: "simulate", Summary: "run exclusive CPU requests and releases through the allocator and show what they get", Run: runSimulate},
	{Name: "pins", Summary: "show exclusive and shared CPUs per container and free cores per NUMA node (table or JSON)", Run: runPins},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches to the subcommand named by args[0] and returns the process's exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Dispatch("nodeagent", commands, args, stdout, stderr)
}
