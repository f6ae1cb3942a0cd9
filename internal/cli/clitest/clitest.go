// Package clitest checks, for the tests of finegrain's programs, what internal/cli promises of
// every program's command line: help on stdout with exit status 0, and the version commands. It
// runs nothing but the program function it is given.
package clitest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/internal/version"
)

// Program runs a program's command line and returns its exit status, stdout and stderr.
type Program func(args ...string) (code int, stdout, stderr string)

// Help checks that the command line args prints help containing each of want on stdout, nothing
// on stderr, and exits 0.
func Help(t *testing.T, run Program, args []string, want ...string) {
	t.Helper()
	code, out, errOut := run(args...)
	if code != 0 || errOut != "" {
		t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", args, code, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%q: help lacks %q:\n%s", args, w, out)
		}
	}
}

// Version checks that `version` and `--version` print the build of program on one line and that
// `version -o json` prints it as JSON.
func Version(t *testing.T, program string, run Program) {
	t.Helper()
	want := version.Get(program)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, errOut := run(args...); code != 0 || out != want.String()+"\n" || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errOut, want)
		}
	}
	code, out, errOut := run("version", "-o", "json")
	var got version.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got != want {
		t.Errorf("version -o json: exit %d, %v, stdout %s, stderr %q; want %+v", code, err, out, errOut, want)
	}
}
