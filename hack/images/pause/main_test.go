package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the pause program: started with runMainEnv set, it runs run and
// prints a line once its signal handlers are in place.
const runMainEnv = "FINEGRAIN_PAUSE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		run(func() { fmt.Println("ready") })
		return
	}
	os.Exit(m.Run())
}

// startPause starts run in a child process and waits until it handles its signals.
func startPause(t *testing.T, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.SysProcAttr = attr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pause: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("pause (pid %d) did not report its signal handlers in place: %q, %v", cmd.Process.Pid, line, err)
	}
	return cmd
}

// statusField returns one field of /proc/PID/status.
func statusField(pid int, field string) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// children returns the PIDs (as seen from the host) whose parent is pid, zombies included.
func children(t *testing.T, pid int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range dirs {
		child, _ := strconv.Atoi(filepath.Base(d))
		if ppid, err := statusField(child, "PPid"); err == nil && ppid == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := startPause(t, nil)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("pause after %v: %v, want exit status 0", sig, err)
		}
	}
}

func TestReapsOrphansAsPIDNamespaceInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a PID namespace")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter (Debian package util-linux)")
	}
	cmd := startPause(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	pid := cmd.Process.Pid
	// sh starts sleep in pause's PID namespace and exits at once: sleep is orphaned and
	// re-parented to the namespace's init, pause, which must reap it when it exits. sleep must
	// not hold the output pipe, or CombinedOutput would wait for it to end before we look.
	out, err := exec.Command(nsenter, "-t", strconv.Itoa(pid), "-p", "--", "sh", "-c", "sleep 1 </dev/null >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("start an orphan in pause's namespace: %v: %s", err, out)
	}
	if got := children(t, pid); len(got) != 1 {
		t.Fatalf("pause (pid %d) has children %v, want the one orphaned sleep", pid, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for got := children(t, pid); len(got) > 0; got = children(t, pid) {
		if time.Now().After(deadline) {
			state, _ := statusField(got[0], "State")
			t.Fatalf("pause (pid %d) still has child %d (state %s) 10 s after it should have exited", pid, got[0], state)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("pause as PID 1 after SIGTERM: %v, want exit status 0", err)
	}
}
