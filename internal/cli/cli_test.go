package cli

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/cli/clitest"
	"github.com/finegrain-dev/finegrain/internal/version"
)

// prog is a program with one command, `frob`, whose flags and failures the tests choose.
func prog(run func(*cobra.Command, []string) error) (*cobra.Command, *time.Duration) {
	var wait time.Duration
	frob := &cobra.Command{Use: "frob", Short: "frob things", Long: "Frobs every thing it is given.", Args: NoArgs, RunE: run}
	frob.Flags().DurationVar(&wait, "wait", time.Second, "how long to wait")
	frob.Flags().DurationVar(&wait, "old-wait", time.Second, "how long to wait")
	if err := frob.Flags().MarkDeprecated("old-wait", "use --wait instead"); err != nil {
		panic(err)
	}
	return NewRoot("prog", "does things", "Prog does things to things.", frob), &wait
}

func execute(run func(*cobra.Command, []string) error, args ...string) (int, string, string, time.Duration) {
	root, wait := prog(run)
	var stdout, stderr bytes.Buffer
	code := Execute(root, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String(), *wait
}

func ok(*cobra.Command, []string) error { return nil }

func TestExecuteExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		run            func(*cobra.Command, []string) error
		code           int
		stdout, stderr []string
	}{
		{"success", []string{"frob"}, ok, 0, nil, nil},
		{"root help", []string{"--help"}, ok, 0,
			[]string{"Prog does things to things.", "Usage:\n  prog COMMAND [flags]", "  frob     frob things\n", "  version  print the program's version", "--version", "Run 'prog COMMAND --help' for a command's flags."}, nil},
		{"help command", []string{"help"}, ok, 0, []string{"Usage:\n  prog COMMAND [flags]"}, nil},
		{"subcommand -h", []string{"frob", "-h"}, ok, 0,
			[]string{"Frobs every thing it is given.", "Usage:\n  prog frob [flags]", "--wait duration   how long to wait (default 1s)"}, nil},
		{"help frob", []string{"help", "frob"}, ok, 0, []string{"Frobs every thing it is given."}, nil},
		{"failure", []string{"frob"}, func(*cobra.Command, []string) error { return errors.New("the things are gone") }, 1,
			nil, []string{"prog frob: the things are gone\n"}},
		{"reported failure", []string{"frob"}, func(*cobra.Command, []string) error { return ErrReported }, 1, nil, nil},
		{"usage error from the command", []string{"frob"}, func(*cobra.Command, []string) error { return Usagef("--wait 0s: want more") }, 2,
			nil, []string{"prog frob: --wait 0s: want more\n\nUsage:\n  prog frob [flags]"}},
		{"unknown flag", []string{"frob", "--bogus"}, ok, 2, nil, []string{"prog frob: unknown flag: --bogus\n", "Flags:\n"}},
		{"bad value", []string{"frob", "--wait", "soon"}, ok, 2, nil, []string{`prog frob: invalid argument "soon" for "--wait" flag`}},
		{"one dash", []string{"frob", "-wait=2s"}, ok, 2, nil, []string{"prog frob: -wait=2s: long flags take two dashes: --wait=2s\n"}},
		{"one dash help", []string{"frob", "-help"}, ok, 2, nil, []string{"-help: long flags take two dashes: --help"}},
		{"argument", []string{"frob", "extra"}, ok, 2, nil, []string{`prog frob: unexpected argument "extra" (this command takes no arguments)`}},
		{"no command", nil, ok, 2, nil, []string{"prog: no command given; want one of frob, version\n\nUsage:\n  prog COMMAND [flags]"}},
		{"unknown command", []string{"frb"}, ok, 2, nil, []string{`prog: unknown command "frb" (did you mean frob?); want one of frob, version`}},
		{"root flag", []string{"--bogus"}, ok, 2, nil, []string{"prog: unknown flag: --bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr, _ := execute(tc.run, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tc.stderr == nil && stderr != "" {
				t.Errorf("stderr = %q, want nothing", stderr)
			}
			if tc.stdout == nil && stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestDeprecatedFlagWarnsOnStderr(t *testing.T) {
	code, stdout, stderr, wait := execute(ok, "frob", "--old-wait", "3s")
	if code != 0 || wait != 3*time.Second || stdout != "" || !strings.Contains(stderr, "Flag --old-wait has been deprecated, use --wait instead") {
		t.Errorf("exit %d, wait %v, stdout %q, stderr %q", code, wait, stdout, stderr)
	}
	_, stdout, _, _ = execute(ok, "frob", "--help")
	if strings.Contains(stdout, "old-wait") {
		t.Errorf("help shows the deprecated flag:\n%s", stdout)
	}
}

func TestVersion(t *testing.T) {
	prog := func(args ...string) (int, string, string) {
		code, stdout, stderr, _ := execute(ok, args...)
		return code, stdout, stderr
	}
	clitest.Version(t, "prog", prog)
	if line := version.Get("prog").String(); !strings.HasPrefix(line, "prog version ") || !strings.HasSuffix(line, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("version line %q", line)
	}
	if code, _, stderr := prog("version", "-o", "yaml"); code != 2 || !strings.Contains(stderr, `prog version: --output "yaml": want text or json`) {
		t.Errorf("version -o yaml: exit %d, %q", code, stderr)
	}
	clitest.Help(t, prog, []string{"version", "-h"}, "-o, --output string")
}

func TestExactArgs(t *testing.T) {
	check := ExactArgs(1, "one node name")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a"}, ""},
		{nil, "want one node name"},
		{[]string{"a", "b"}, `want one node name, got 2 arguments: ["a" "b"]`},
	} {
		err := check(nil, tc.args)
		var usage *UsageError
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &usage) || err.Error() != tc.want) {
			t.Errorf("ExactArgs(1)(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}
