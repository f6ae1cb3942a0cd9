// Command nodeagent is finegrain's node agent and its inspection tools. Every subcommand lives in
// its own file as a function from arguments to an exit status (0 success, 1 failure, 2 usage
// error); this file only dispatches, so adding a subcommand is one line in commands plus its file.
package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// command is one subcommand of nodeagent.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order the usage text shows them.
var commands = []command{
	{"run", "run the node agent: pin opted-in containers, keep the rest in the shared pool, repair drift", runRun},
	{"topology", "print the machine's sockets, NUMA nodes, L3 groups and cores (table or JSON)", runTopology},
	{"simulate", "run exclusive CPU requests and releases through the allocator and show what they get", runSimulate},
	{"pins", "show exclusive and shared CPUs per container and free cores per NUMA node (table or JSON)", runPins},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to the subcommand named by args[0] and returns the process's exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "nodeagent: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: nodeagent <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'nodeagent <command> -h' for a command's flags.")
}
