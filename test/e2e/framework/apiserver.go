package framework

import (
	"context"
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestartAPIServer kills the cluster's kube-apiserver with SIGKILL, as a crash would, and starts
// it again with the same command line, environment and directory, as hack/cluster/up.sh started
// it (a session of its own, output appended to its log, its PID file rewritten so that the
// cluster scripts find it). It waits until the API server is ready and every node of the cluster
// is Ready again, and returns how long the API server was gone.
func (c *Cluster) RestartAPIServer(t testing.TB) time.Duration {
	t.Helper()
	pid, running, err := c.daemonPID("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if !running {
		t.Fatalf("kube-apiserver (PID %d) does not run", pid)
	}
	argv, err1 := procList(pid, "cmdline")
	env, err2 := procList(pid, "environ")
	cwd, err3 := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err := errors.Join(err1, err2, err3); err != nil || len(argv) == 0 {
		t.Fatalf("read kube-apiserver's command line: %v", err)
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill kube-apiserver (PID %d): %v", pid, err)
	}
	Eventually(t, "kube-apiserver to exit", 10*time.Second, func(context.Context) error {
		if _, running, _ := c.daemonPID("kube-apiserver"); running {
			return errors.New("it still runs")
		}
		return nil
	})
	log, err := os.OpenFile(filepath.Join(c.LogDir, "kube-apiserver.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := closeInheritedOnExec(); err != nil {
		t.Fatal(err)
	}
	// The killed server counts as gone once its main thread is a zombie, but its other threads
	// may hold its port a moment longer: a start that ends at once ("address already in use") is
	// tried again.
	var newPID int
	for try := 1; newPID == 0; try++ {
		fmt.Fprintf(log, "=== %s starting again after SIGKILL (e2e): %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(argv, " "))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, cwd, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start kube-apiserver again: %v", err)
		}
		// Reaped whenever it ends (make cluster-down), so that it never lingers as a zombie.
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if try == 5 {
				t.Fatalf("kube-apiserver started again ended at once %d times (last: %v); see %s", try, err, log.Name())
			}
			time.Sleep(time.Second)
		case <-time.After(3 * time.Second):
			newPID = cmd.Process.Pid
		}
	}
	started, ok := processStart(newPID)
	if !ok {
		t.Fatalf("kube-apiserver started again (PID %d) is gone; see %s", newPID, log.Name())
	}
	if err := os.WriteFile(filepath.Join(c.Env["PID_DIR"], "kube-apiserver.pid"), []byte(fmt.Sprintf("%d %s\n", newPID, started)), 0o644); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "kube-apiserver ready again", 2*time.Minute, func(ctx context.Context) error {
		return c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
	back := time.Since(start)
	Eventually(t, "every node Ready after the API server's restart", time.Minute, func(ctx context.Context) error {
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !NodeReady(node) {
				return fmt.Errorf("node %s is not Ready", n.Name)
			}
		}
		return nil
	})
	return back
}

// NodeReady reports whether a node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// closeInheritedOnExec marks every descriptor above standard error close-on-exec. Go opens its
// own so, but those the test binary inherited stay open across exec: under make e2e one is
// hack/cluster's lock (fd 8 of e2e.sh), and an API server started holding it would hold the
// cluster's lock until the cluster went down (make cluster-down waits for that lock).
func closeInheritedOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list this process's descriptors: %w", err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// procList reads a NUL-separated /proc/PID file (cmdline, environ).
func procList(pid int, file string) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}
