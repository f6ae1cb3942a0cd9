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
)

// daemonPID returns the PID of a daemon hack/cluster/up.sh started (kubelet-node-2, say) and
// whether it still runs: its PID file holds the PID and the process's start time, which tells
// the daemon from a process that reused its PID.
func (c *Cluster) daemonPID(name string) (int, bool, error) {
	dir := c.Env["PID_DIR"]
	if dir == "" {
		return 0, false, errors.New("cluster.env lacks PID_DIR; bring the cluster up again with make cluster-up")
	}
	data, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0, false, fmt.Errorf("PID file of %s: %w", name, err)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, false, fmt.Errorf("PID file of %s holds %q, not \"PID START\"", name, data)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return 0, false, fmt.Errorf("PID file of %s holds PID %q", name, fields[0])
	}
	start, running := processStart(pid)
	return pid, running && start == fields[1], nil
}

// processStart returns a process's start time in clock ticks (field 22 of /proc/PID/stat); a
// zombie counts as gone.
func processStart(pid int) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 20 || fields[0] == "Z" {
		return "", false
	}
	return fields[19], true
}

// KillKubelet kills the kubelet of a node of a cluster of several with SIGKILL, as a crash
// would: the node's containerd and containers keep running and its Lease is no longer renewed.
// The kubelet is started again when the test ends (StartStoppedKubelets), or earlier by the
// test itself.
func (c *Cluster) KillKubelet(t testing.TB, node string) {
	t.Helper()
	if len(c.Nodes) < 2 {
		t.Fatalf("KillKubelet needs a cluster of several nodes (make cluster-up NODES=3): the only node's kubelet runs the tests' pods")
	}
	if _, err := c.Node(node); err != nil {
		t.Fatal(err)
	}
	pid, running, err := c.daemonPID("kubelet-" + node)
	if err != nil {
		t.Fatal(err)
	}
	if !running {
		t.Fatalf("the kubelet of node %s (PID %d) does not run", node, pid)
	}
	t.Cleanup(func() { c.StartStoppedKubelets(t) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the kubelet of node %s (PID %d): %v", node, pid, err)
	}
	Eventually(t, fmt.Sprintf("the kubelet of node %s (PID %d) to exit", node, pid), 10*time.Second, func(context.Context) error {
		if _, running, _ := c.daemonPID("kubelet-" + node); running {
			return errors.New("it still runs")
		}
		return nil
	})
}

// StartStoppedKubelets starts the kubelets that stopped on a cluster of several nodes again,
// through hack/cluster/up.sh (which does only that when the rest of the cluster runs), and
// waits until their nodes are Ready; it does nothing when every kubelet runs.
func (c *Cluster) StartStoppedKubelets(t testing.TB) {
	t.Helper()
	var stopped []string
	for _, n := range c.Nodes {
		_, running, err := c.daemonPID("kubelet-" + n.Name)
		if err != nil {
			t.Error(err)
			return
		}
		if !running {
			stopped = append(stopped, n.Name)
		}
	}
	if len(stopped) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.RepoPath("hack/cluster/up.sh"))
	cmd.Env = append(os.Environ(), "NODES="+c.Env["NODES"], "KUBELET_CPU_POLICY="+c.CPUManagerPolicy,
		"CONTAINERD="+c.Env["CONTAINERD"], "NRI_FAIL_CLOSED="+c.Env["NRI_FAIL_CLOSED"])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("start the kubelets of %v again with hack/cluster/up.sh: %v\n%s", stopped, err, out)
		return
	}
	var said []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "cluster: ") {
			said = append(said, line)
		}
	}
	t.Logf("started the kubelets of %v again: %s", stopped, strings.Join(said, "; "))
}
