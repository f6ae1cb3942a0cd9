package vm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testPrefix = "@@fgvm:N0NCE"

func TestParseMarker(t *testing.T) {
	tests := []struct {
		line   string
		before string
		want   marker
		ok     bool
	}{
		{"@@fgvm:N0NCE:up", "", marker{kind: markUp}, true},
		{"\x1b[2J\x1b[0m@@fgvm:N0NCE:up\r", "\x1b[2J\x1b[0m", marker{kind: markUp}, true},
		{"@@fgvm:N0NCE:begin:3", "", marker{kind: markBegin, job: 3}, true},
		{"partial@@fgvm:N0NCE:end:1:137", "partial", marker{kind: markEnd, job: 1, code: 137}, true},
		{"@@fgvm:N0NCE:fail:mount cgroup2", "", marker{kind: markFail, text: "mount cgroup2"}, true},
		{"@@fgvm:N0NCE:done", "", marker{kind: markDone}, true},
		{"@@fgvm:OTHER:done", "@@fgvm:OTHER:done", marker{}, false},
		{"@@fgvm:N0NCE:end:1", "", marker{kind: markEnd, job: 1}, false},
		{"@@fgvm:N0NCE:begin:-1", "", marker{kind: markBegin, job: -1}, false},
		{"@@fgvm:N0NCE:upx", "", marker{kind: markUp}, false},
		{"@@fgvm:N0NCE:what", "@@fgvm:N0NCE:what", marker{}, false},
		{"plain output", "plain output", marker{}, false},
	}
	for _, tt := range tests {
		before, m, ok := parseMarker(tt.line, testPrefix)
		if ok != tt.ok || (ok && (before != tt.before || m != tt.want)) {
			t.Errorf("parseMarker(%q) = %q, %+v, %v; want %q, %+v, %v", tt.line, before, m, ok, tt.before, tt.want, tt.ok)
		}
	}
}

func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{"@@fgvm:N0NCE:end:1:0", "x@@fgvm:N0NCE:begin:99999999999999999999", "@@fgvm:N0NCE:fail:", "@@fgvm:N0NCE:end::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		before, m, ok := parseMarker(line, testPrefix)
		if !strings.HasPrefix(line, before) {
			t.Fatalf("before %q is not a prefix of %q", before, line)
		}
		if ok && (m.job < 0 || m.kind < markUp || m.kind > markDone) {
			t.Fatalf("accepted malformed marker %+v from %q", m, line)
		}
		c := newConsole("N0NCE", []Job{{Package: "./a"}}, time.Now())
		c.line(line, time.Now()) // must never panic, whatever the job index
		_ = c.results()
	})
}

func TestConsoleSortsOutputByJob(t *testing.T) {
	start := time.Now()
	c := newConsole("N0NCE", []Job{{Package: "./a"}, {Package: "./b"}}, start)
	lines := []string{
		"SeaBIOS noise",
		"@@fgvm:N0NCE:up",
		"@@fgvm:N0NCE:begin:0",
		"=== RUN TestA",
		"PASS",
		"@@fgvm:N0NCE:end:0:0",
		"@@fgvm:N0NCE:begin:1",
		"--- FAIL: TestB",
		"no newline at the end@@fgvm:N0NCE:end:1:1",
		"[    3.1] reboot: Power down",
	}
	for i, l := range lines {
		c.line(l, start.Add(time.Duration(i)*time.Second))
	}
	want := []JobResult{
		{Job: Job{Package: "./a"}, ExitCode: 0, Output: "=== RUN TestA\nPASS\n"},
		{Job: Job{Package: "./b"}, ExitCode: 1, Output: "--- FAIL: TestB\nno newline at the end\n"},
	}
	if diff := cmp.Diff(want, c.results()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if c.upAfter != time.Second {
		t.Errorf("up after %s, want 1s", c.upAfter)
	}
	if err := c.err(); err == nil || !strings.Contains(err.Error(), "before running every job") {
		t.Errorf("no done marker: err = %v", err)
	}
	c.line("@@fgvm:N0NCE:done", start)
	if err := c.err(); err != nil {
		t.Errorf("after done: %v", err)
	}
}

func TestConsoleErrors(t *testing.T) {
	c := newConsole("N0NCE", []Job{{Package: "./pkg/cgroup"}}, time.Now())
	if err := c.err(); err == nil || !strings.Contains(err.Error(), "never reached userspace") {
		t.Errorf("empty console: %v", err)
	}
	c.line("@@fgvm:N0NCE:up", time.Now())
	c.line("@@fgvm:N0NCE:begin:0", time.Now())
	if err := c.err(); err == nil || !strings.Contains(err.Error(), "while running ./pkg/cgroup") {
		t.Errorf("hung job: %v", err)
	}
	c.line("@@fgvm:N0NCE:fail:mount cgroup2", time.Now())
	if err := c.err(); err == nil || !strings.Contains(err.Error(), "guest setup failed: mount cgroup2") {
		t.Errorf("setup failure: %v", err)
	}
}
