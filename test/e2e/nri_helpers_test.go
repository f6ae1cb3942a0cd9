//go:build e2e

// Helpers of the NRI cases (nri_*_test.go): they run on a cluster brought up with CONTAINERD=2
// (containerd 2.x with NRI) and skip on any other. They read the cluster's containerd settings
// from cluster.env, ask containerd for a container's runtime spec, read fgworker's first affinity
// reading from a worker's log, and stop, freeze and restart the cluster's daemons.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// nriAnnotation lets a pod start while the agent's NRI plugin is absent (daemonset/nri/).
const nriAnnotation = "tolerate-missing-plugins.finegrain.dev"

// nriEnv is what cluster.env says about the cluster's containerd.
type nriEnv struct {
	// failClosed is true when containerd refuses containers while the plugin is absent.
	failClosed bool
	// ctr is the containerd 2.x ctr; sock containerd's socket; bin the directory of its binaries.
	ctr, sock, bin string
	// pids is where hack/cluster keeps its daemons' PID files; logDir their logs.
	pids, logDir string
	config       string
}

// requireNRI skips unless the cluster runs containerd with NRI, and deploys the agent, waiting
// until it pins through NRI.
func requireNRI(t *testing.T, c *framework.Cluster) nriEnv {
	t.Helper()
	if c.Env["CONTAINERD"] != "2" || c.Env["NRI_SOCK"] == "" {
		t.Skip("needs containerd 2 with NRI: bring the cluster up with CONTAINERD=2 make cluster-up (make e2e runs an NRI pass)")
	}
	c.RequireCPUManagerPolicy(t, "none")
	e := containerdEnv(c, c.Env["CONTAINERD_BIN"])
	e.failClosed = c.Env["NRI_FAIL_CLOSED"] == "1"
	deployAgent(t, c, true)
	waitNRIConnected(t)
	return e
}

// containerdEnv is what cluster.env says about the cluster's containerd, whose binaries are in bin.
func containerdEnv(c *framework.Cluster, bin string) nriEnv {
	sock := c.Env["CONTAINERD_SOCK"]
	return nriEnv{bin: bin, ctr: filepath.Join(bin, "ctr"), sock: sock, logDir: c.Env["LOG_DIR"],
		config: filepath.Join(c.Dir, "containerd.toml"), pids: filepath.Join(filepath.Dir(sock), "..", "pids")}
}

// waitNRIConnected waits until the agent reports the nri path first and its plugin connected.
func waitNRIConnected(t *testing.T) {
	t.Helper()
	framework.Eventually(t, "the agent's NRI plugin to connect", agentReadyTimeout, func(ctx context.Context) error {
		v, err := agentPins(ctx)
		if err != nil {
			return err
		}
		if len(v.Paths) == 0 || v.Paths[0] != "nri" {
			return fmt.Errorf("agent paths %v, want nri first", v.Paths)
		}
		n, err := agentMetric(ctx, "finegrain_nodeagent_nri_connected")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("finegrain_nodeagent_nri_connected %v", n)
		}
		return nil
	})
}

// agentMetric reads one sample of the agent's /metrics; name includes its labels as printed.
func agentMetric(ctx context.Context, name string) (float64, error) {
	code, body, err := agentGet(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("GET /metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no sample %s in /metrics", name)
}

// workerPod is a pinned pod asking for cpus exclusive CPUs whose container "worker" runs one
// fgworker rank for d and prints its JSON result, in which affinityAtInit is the rank's first
// sched_getaffinity, read before main.
func workerPod(name, cpus string, d time.Duration) *corev1.Pod {
	pod := pinnedPod(name, cpus, "/usr/local/bin/fgworker", "dgemm", "-np", "1", "-n", "32", "-duration", d.String(), "-o", "json")
	pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Mi")
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
	return pod
}

// fgworkerRun is the part of fgworker's JSON output the cases read.
type fgworkerRun struct {
	Processes []struct {
		AffinityAtInit  string `json:"affinityAtInit"`
		AffinityAtStart string `json:"affinityAtStart"`
	} `json:"processes"`
}

// firstAffinity reads the rank's first affinity from fgworker's output.
func firstAffinity(out string) (cpuset.CPUSet, error) {
	var run fgworkerRun
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		return cpuset.New(), fmt.Errorf("fgworker output %q: %w", out, err)
	}
	if len(run.Processes) != 1 {
		return cpuset.New(), fmt.Errorf("fgworker ran %d processes, want 1", len(run.Processes))
	}
	return cpuset.Parse(run.Processes[0].AffinityAtInit)
}

// pinEvent matches the agent's ExclusiveCPUs event.
var pinEvent = regexp.MustCompile(`container "worker" gets exclusive CPUs (\S+) on NUMA node`)

// announcedPin returns the CPUs the agent's event announced for the pod's worker.
func announcedPin(ctx context.Context, c *framework.Cluster, ns, pod string) (cpuset.CPUSet, error) {
	evs, err := podEvents(ctx, c, ns, pod)
	if err != nil {
		return cpuset.New(), err
	}
	for _, ev := range evs {
		if m := pinEvent.FindStringSubmatch(ev.Message); m != nil {
			return cpuset.Parse(m[1])
		}
	}
	return cpuset.New(), fmt.Errorf("no ExclusiveCPUs event for pod %s/%s", ns, pod)
}

// checkRanPinned waits for a worker pod to succeed and checks that its rank's first affinity
// reading was the pin the agent announced.
func checkRanPinned(t *testing.T, c *framework.Cluster, ns, name string, timeout time.Duration) cpuset.CPUSet {
	t.Helper()
	pod := c.WaitForPod(t, ns, name, "succeeded", timeout, framework.Completed)
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("worker %s: %s", name, observe.PodSummary(pod))
	}
	ctx := context.Background()
	out, err := c.PodLogs(ctx, ns, name, "worker")
	if err != nil {
		t.Fatal(err)
	}
	first, err := firstAffinity(out)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := announcedPin(ctx, c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equals(pin) {
		t.Errorf("worker %s first ran on CPUs %s, its pin is %s: it ran unpinned", name, first, pin)
	}
	return pin
}

// eventWith waits for an event about the pod whose message holds every substring.
func eventWith(t *testing.T, c *framework.Cluster, ns, pod string, timeout time.Duration, subs ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	framework.Eventually(t, fmt.Sprintf("an event on %s/%s saying %q", ns, pod, subs), timeout, func(ctx context.Context) error {
		evs, err := podEvents(ctx, c, ns, pod)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(ev.Message, s)
			}
			if all {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("%d events, none matches", len(evs))
	})
	return found
}

// specCPUs returns the cpuset containerd holds in a container's runtime spec.
func (e nriEnv) specCPUs(ctx context.Context, id string) (string, error) {
	return observe.SpecCPUs(ctx, e.ctr, e.sock, id)
}

// daemonPID returns the PID of one of the cluster's daemons from its PID file.
func (e nriEnv) daemonPID(t *testing.T, name string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.pids, name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		t.Fatalf("PID file of %s is empty", name)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// restartContainerd stops the cluster's containerd (its containers keep running in their shims)
// and starts it again as up.sh does, through hack/cluster/lib.sh.
func (e nriEnv) restartContainerd(t *testing.T, c *framework.Cluster) {
	t.Helper()
	pid := e.daemonPID(t, "containerd")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "containerd to exit", 30*time.Second, func(context.Context) error {
		if err := syscall.Kill(pid, 0); err == nil {
			return fmt.Errorf("containerd %d still runs", pid)
		}
		return nil
	})
	script := fmt.Sprintf(". %q && start_daemon containerd %q --config %q", c.RepoPath("hack/cluster/lib.sh"), filepath.Join(e.bin, "containerd"), e.config)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "FINEGRAIN_CLUSTER_DIR="+c.Dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("start containerd again: %v: %s", err, stderr.String())
	}
	framework.Eventually(t, "containerd to answer again", 30*time.Second, func(ctx context.Context) error {
		return exec.CommandContext(ctx, e.ctr, "--address", e.sock, "version").Run()
	})
}

// freeze stops a daemon with SIGSTOP until the returned function (also a cleanup) resumes it.
func (e nriEnv) freeze(t *testing.T, name string) func() {
	t.Helper()
	pid := e.daemonPID(t, name)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("resume %s: %v", name, err)
			}
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// containerdLogSince returns containerd's log lines written after the test's start.
func (e nriEnv) containerdLogSince(t *testing.T, start time.Time, grep string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.logDir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		ts, _, ok := strings.Cut(strings.TrimPrefix(line, `time="`), `"`)
		if !ok || !strings.Contains(line, grep) {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && !at.Before(start) {
			out = append(out, line)
		}
	}
	return out
}

// withAgentArgs rolls the agent out with its arguments changed by edit and waits until it pins
// through NRI again; the original arguments come back when the test ends.
func withAgentArgs(t *testing.T, c *framework.Cluster, edit func([]string) []string) {
	t.Helper()
	ds := c.Client.AppsV1().DaemonSets(framework.SystemNamespace)
	set := func(args []string) error {
		d, err := ds.Get(context.Background(), "finegrain-nodeagent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Args = args
		_, err = ds.Update(context.Background(), d, metav1.UpdateOptions{})
		return err
	}
	d, err := ds.Get(context.Background(), "finegrain-nodeagent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(d.Spec.Template.Spec.Containers[0].Args)
	want := edit(slices.Clone(orig))
	if err := set(want); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(orig); err != nil {
			t.Errorf("restore the agent's arguments: %v", err)
			return
		}
		waitAgentArgs(t, c, orig)
	})
	waitAgentArgs(t, c, want)
}

// waitAgentArgs waits for a ready agent pod running with args, its plugin connected.
func waitAgentArgs(t *testing.T, c *framework.Cluster, args []string) {
	t.Helper()
	framework.Eventually(t, "the agent to run with "+strings.Join(args, " "), agentReadyTimeout, func(ctx context.Context) error {
		p, err := agentPod(ctx, c)
		if err != nil {
			return err
		}
		if !slices.Equal(p.Spec.Containers[0].Args, args) || !podReady(p) {
			return fmt.Errorf("agent pod %s is %s", p.Name, observe.PodSummary(p))
		}
		return nil
	})
	waitNRIConnected(t)
}

// waitContainerdLog waits for a line of containerd's log written after start that holds sub.
func (e nriEnv) waitContainerdLog(t *testing.T, start time.Time, sub string, timeout time.Duration) string {
	t.Helper()
	var found string
	framework.Eventually(t, "containerd to log "+sub, timeout, func(context.Context) error {
		if lines := e.containerdLogSince(t, start, sub); len(lines) > 0 {
			found = lines[0]
			return nil
		}
		return fmt.Errorf("not yet")
	})
	return found
}
