// Package cli is the command-line frame of finegrain's programs (nodeagent, placer,
// kubectl-finegrain) on cobra and pflag. It owns what every program does alike: the exit-status
// contract (0 success, 1 failure, 2 usage error), help on stdout, usage errors on stderr as one
// line naming the bad flag or argument followed by the usage, the shape of the usage text, the
// `version` subcommand and --version. Each program's commands own their flags and their work;
// this package runs nothing of theirs but their RunE.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/finegrain-dev/finegrain/internal/version"
)

// Exit statuses of every program.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError is a command line the command cannot run: exit status 2, with the usage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// Usagef is a usage error with the given text.
func Usagef(format string, a ...any) error { return Usage(fmt.Errorf(format, a...)) }

// ErrReported ends a command that failed and has already said why, in its output or its log:
// exit status 1 and nothing more printed.
var ErrReported = errors.New("the command failed and reported why")

// NoArgs is the Args of a command that takes no positional argument.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q (this command takes no arguments)", args[0])
	}
	return nil
}

// ExactArgs is the Args of a command that takes n positional arguments, described by what
// ("one node name").
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case len(args) == 0:
			return Usagef("want %s", what)
		}
		return Usagef("want %s, got %d arguments: %q", what, len(args), args)
	}
}

// NewRoot returns the root command of program with its subcommands, the `version` subcommand
// and --version. short and long say what the program is for; the root itself runs nothing, so
// a missing or unknown command is a usage error.
func NewRoot(program, short, long string, commands ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   program,
		Short: short,
		Long:  long,
		// The root is runnable only to turn a missing or unknown command into a usage error:
		// cobra would print the help and succeed, or fail with an error it does not type.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return Usagef("no command given; want one of %s", strings.Join(commandNames(cmd), ", "))
			}
			hint := ""
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return Usagef("unknown command %q%s; want one of %s", args[0], hint, strings.Join(commandNames(cmd), ", "))
		},
		Version:                    version.Get(program).String(),
		SuggestionsMinimumDistance: 2,
		DisableFlagsInUseLine:      true,
		SilenceErrors:              true,
		SilenceUsage:               true,
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(commands...)
	root.AddCommand(newVersionCommand(program))
	// Declared here, without cobra's -v shorthand, which Kubernetes programs keep for verbosity.
	root.Flags().Bool("version", false, "print "+program+"'s version and exit (the version command says more)")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetUsageFunc(writeUsage)
	return root
}

// commandNames lists the runnable subcommands of cmd.
func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" {
			names = append(names, c.Name())
		}
	}
	return names
}

// Execute runs root on args and returns the exit status. Help goes to stdout with status 0; a
// usage error prints one line naming what is wrong and the usage of the command to stderr, status
// 2; a failure prints "<command path>: <error>" to stderr (unless it is ErrReported), status 1.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// pflag writes deprecation warnings to a flag set's output; cobra would copy them to the
	// command's output, which is stdout here.
	walk(root, func(c *cobra.Command) { c.Flags().SetOutput(stderr) })
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return flagError(cmd, err, args) })
	cmd, err := root.ExecuteC()
	var usage *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %v\n\n%s", cmd.CommandPath(), usage.Err, cmd.UsageString())
		return ExitUsage
	case errors.Is(err, ErrReported):
		return ExitFailure
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return ExitFailure
	}
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// flagError makes every flag parsing error a usage error, and names the fix for a long flag
// written with one dash (`-kubeconfig`), which Go's flag package accepted and pflag reads as a
// group of one-letter flags.
func flagError(cmd *cobra.Command, err error, args []string) error {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() == "" {
		return Usage(err)
	}
	for _, arg := range args {
		if arg == "--" {
			break
		}
		group, isShort := strings.CutPrefix(arg, "-")
		name, _, _ := strings.Cut(group, "=")
		if isShort && len(name) > 1 && !strings.HasPrefix(name, "-") &&
			strings.HasSuffix(group, unknown.GetSpecifiedShortnames()) && cmd.Flags().Lookup(name) != nil {
			return Usagef("%s: long flags take two dashes: -%s", arg, arg)
		}
	}
	return Usage(err)
}

// writeUsage prints the usage of c: how to call it, its subcommands, its flags with their
// defaults.
func writeUsage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:\n")
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s COMMAND [flags]\n\nCommands:\n", c.CommandPath())
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(tw, "  %s\t%s\n", sub.Name(), sub.Short)
			}
		}
		tw.Flush()
	} else {
		fmt.Fprintf(&b, "  %s\n", c.UseLine())
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", c.LocalFlags().FlagUsages())
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\nGlobal flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s COMMAND --help' for a command's flags.\n", c.CommandPath())
	}
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}
