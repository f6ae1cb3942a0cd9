package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	var got []string
	commands := []Command{
		{"run", "run it", func(args []string, stdout, _ io.Writer) int {
			got = args
			io.WriteString(stdout, "ran")
			return 1
		}},
		{"plan", "plan it", func([]string, io.Writer, io.Writer) int { return 0 }},
	}
	for _, tc := range []struct {
		args             []string
		status           int
		stdout, stderr   string
		notStdout, ranOn []string
	}{
		{args: []string{"run", "-x", "y"}, status: 1, stdout: "ran", ranOn: []string{"-x", "y"}},
		{args: nil, status: 2, stderr: "usage: prog <command> [flags]"},
		{args: []string{"--help"}, status: 0, stdout: "  plan  plan it\n"},
		{args: []string{"help"}, status: 0, stdout: "Run 'prog <command> -h' for a command's flags."},
		{args: []string{"frob"}, status: 2, stderr: `prog: unknown command "frob"`},
	} {
		got = nil
		var stdout, stderr bytes.Buffer
		status := Dispatch("prog", commands, tc.args, &stdout, &stderr)
		if status != tc.status || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("Dispatch(%q) = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
				tc.args, status, stdout.String(), stderr.String(), tc.status, tc.stdout, tc.stderr)
		}
		if strings.Join(got, " ") != strings.Join(tc.ranOn, " ") {
			t.Errorf("Dispatch(%q) ran with %q, want %q", tc.args, got, tc.ranOn)
		}
	}
}
