package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// superviseShell runs script under sh with supervise, with SIGCHLD subscribed as runCommand does;
// signals sent on the returned channel reach supervise as if the container runtime sent them.
func superviseShell(t *testing.T, script string) (<-chan supervision, chan<- os.Signal) {
	t.Helper()
	sh := "/bin/sh"
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGCHLD)
	t.Cleanup(func() { signal.Stop(sigs) })
	out := make(chan supervision, 1)
	go func() {
		res, err := supervise(sh, []string{sh, "-c", script}, os.Environ(), sigs)
		if err != nil {
			t.Errorf("supervise: %v", err)
		}
		out <- res
	}()
	return out, sigs
}

func waitResult(t *testing.T, out <-chan supervision) supervision {
	t.Helper()
	select {
	case res := <-out:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("the supervised command did not end within 30 s")
		return supervision{}
	}
}

func TestSuperviseReturnsTheCommandsStatus(t *testing.T) {
	cases := map[string]int{"exit 0": 0, "exit 3": 3, "kill -TERM $$": 128 + 15, "kill -KILL $$": 128 + 9}
	for script, want := range cases {
		out, _ := superviseShell(t, script)
		if got := waitResult(t, out).Status; got != want {
			t.Errorf("sh -c %q: status %d, want %d", script, got, want)
		}
	}
}

func TestSuperviseReapsOrphans(t *testing.T) {
	// As PID 1 the kernel hands orphans to this process; a subreaper gets them the same way.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	// The subshell exits at once, orphaning its sleep, which ends while the command still runs.
	out, _ := superviseShell(t, "(sleep 0.2 &); sleep 1.5")
	res := waitResult(t, out)
	if res.Status != 0 || res.Orphans != 1 {
		t.Errorf("supervision = %+v, want status 0 and the one orphaned sleep reaped", res)
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); err != syscall.ECHILD {
		t.Errorf("after supervise a child is left: wait4 = %d, %v", pid, err)
	}
}

func TestSuperviseForwardsSignals(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	out, sigs := superviseShell(t, `trap 'exit 7' TERM; : > `+ready+`; while :; do sleep 0.05; done`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never got ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sigs <- syscall.SIGTERM
	if got := waitResult(t, out).Status; got != 7 {
		t.Errorf("status after SIGTERM = %d, want 7 from the command's trap", got)
	}
}

func TestRunCommandNotFound(t *testing.T) {
	code, err := runCommand([]string{"finegrain-no-such-command"}, os.Environ())
	if code != 127 || err == nil || !strings.Contains(err.Error(), "PATH=") {
		t.Fatalf("runCommand = %d, %v; want 127 and an error naming PATH", code, err)
	}
}
