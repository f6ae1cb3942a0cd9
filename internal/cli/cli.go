// Package cli dispatches a command line to the subcommands of finegrain's programs (nodeagent,
// placer). It owns only the dispatch and the usage text; each subcommand parses its own flags and
// returns its exit status: 0 success, 1 failure, 2 usage error.
package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Command is one subcommand of a program.
type Command struct {
	Name    string
	Summary string
	Run     func(args []string, stdout, stderr io.Writer) int
}

// Dispatch runs the command named by args[0] with the rest of args and returns its exit status.
// Help flags print the usage to stdout (status 0); no command or an unknown one prints it to
// stderr (status 2).
func Dispatch(prog string, commands []Command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr, prog, commands)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout, prog, commands)
		return 0
	}
	for _, c := range commands {
		if c.Name == args[0] {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prog, args[0])
	usage(stderr, prog, commands)
	return 2
}

func usage(w io.Writer, prog string, commands []Command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prog)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", prog)
}
