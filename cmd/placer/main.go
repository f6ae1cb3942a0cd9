// Command placer is finegrain's central placer. `placer run` is the controller the Deployment in
// daemonset/placer runs; `placer plan` is a dry run on files that prints where a job's workers
// would go. Each subcommand lives in its own file as a function from arguments to an exit
// status (0 success, 1 failure, 2 usage error); this file only dispatches.
package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"run", "run the placer against the cluster (leader-elected)", runRun},
	{"plan", "plan an HPCJob or a pod group on a cluster snapshot file and print the placements", runPlan},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

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
	fmt.Fprintf(stderr, "placer: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: placer <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'placer <command> -h' for a command's flags.")
}
