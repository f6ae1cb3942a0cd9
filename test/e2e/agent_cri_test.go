//go:build e2e

// The node agent's CRI client across a containerd restart on containerd 1.6, where new
// containers are pinned through inotify and named through CRI: the agent reaches the runtime
// through the socket's directory (daemonset/nodeagent) and redials, so it keeps naming new
// containers through the socket the restarted containerd made.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// Samples of the agent's /metrics the case compares before and after the restart.
const (
	metricInotifyPins = `finegrain_nodeagent_pins_total{path="inotify"}`
	metricResolveErrs = `finegrain_nodeagent_errors_total{reason="cri-resolve"}`
)

// TestAgentCRIAfterContainerdRestart: containerd restarts (its containers keep running in their
// shims and its socket is made anew); a pinned pod created afterwards is pinned through inotify
// with its container named by the restarted runtime, not later from the pod's status.
func TestAgentCRIAfterContainerdRestart(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	e := requireContainerd16(t, c)
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	ctx := context.Background()
	before := agentSamples(t, ctx, metricInotifyPins, metricResolveErrs)

	e.restartContainerd(t, c)
	c.OnFailure(t, "last lines of containerd's log", func(_ context.Context, w io.Writer) error {
		data, err := os.ReadFile(filepath.Join(e.logDir, "containerd.log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		_, werr := io.WriteString(w, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		return errors.Join(err, werr)
	})
	c.CreatePod(t, ns, pinnedPod("after-restart", "1"))
	pod, pin := waitPinned(t, c, ns, "after-restart", 1)

	after := agentSamples(t, ctx, metricInotifyPins, metricResolveErrs)
	if after[metricInotifyPins] <= before[metricInotifyPins] {
		t.Errorf("%s = %v (was %v): the pin was not written on the inotify path", metricInotifyPins, after[metricInotifyPins], before[metricInotifyPins])
	}
	if after[metricResolveErrs] != before[metricResolveErrs] {
		t.Errorf("%s = %v (was %v): the agent could not ask the restarted containerd who a container is", metricResolveErrs, after[metricResolveErrs], before[metricResolveErrs])
	}
	line, unresolved := agentPinLog(t, c, string(pod.UID))
	if line.Via != "inotify" || line.Name != "worker" || line.Resolve <= 0 {
		t.Errorf("agent's pin of %s: via %q, name %q, runtime asked in %v; want inotify, worker and a CRI answer", pod.Name, line.Via, line.Name, time.Duration(line.Resolve))
	}
	for _, l := range unresolved {
		t.Errorf("the agent could not name a container of %s through CRI and waited for the pod's status: %s", pod.Name, l)
	}
	t.Logf("pinned %s to %s through inotify after the restart: window %v, CRI answered in %v",
		pod.Name, pin, time.Duration(line.Window), time.Duration(line.Resolve))
}

// requireContainerd16 skips unless the cluster runs containerd 1.6 (the agent pins through
// inotify there) and returns what cluster.env says about it, for the NRI cases' helpers.
func requireContainerd16(t *testing.T, c *framework.Cluster) nriEnv {
	t.Helper()
	if c.Env["CONTAINERD"] == "2" {
		t.Skip("containerd 2 pins new containers through NRI at creation; TestNRIContainerdRestart covers its restart")
	}
	// up.sh starts Debian's containerd 1.6 from PATH.
	path, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("the cluster runs Debian's containerd, which is not on PATH: %v", err)
	}
	return containerdEnv(c, filepath.Dir(path))
}

// agentSamples reads several samples of the agent's /metrics.
func agentSamples(t *testing.T, ctx context.Context, names ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, n := range names {
		v, err := agentMetric(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = v
	}
	return out
}

// logLine is one line of the agent's JSON log: the "pinned container" line's fields, and the
// container a warning is about.
type logLine struct {
	Msg       string `json:"msg"`
	Container string `json:"container"`
	PodUID    string `json:"podUID"`
	Name      string `json:"name"`
	Via       string `json:"via"`
	Window    int64  `json:"window"`
	Resolve   int64  `json:"resolve"`
}

// The agent's log messages the case looks for.
const (
	msgPinned     = "pinned container"
	msgUnresolved = "cannot ask the runtime for a container's name; waiting for the pod's status"
)

// agentPinLog returns the agent's log line about pinning a container of the pod, and the lines
// saying the runtime could not name one of the pod's containers.
func agentPinLog(t *testing.T, c *framework.Cluster, podUID string) (pinned logLine, unresolved []string) {
	t.Helper()
	framework.Eventually(t, "the agent's log line about the pin", 10*time.Second, func(ctx context.Context) error {
		agent, err := agentPod(ctx, c)
		if err != nil {
			return err
		}
		log, err := c.PodLogs(ctx, agent.Namespace, agent.Name, "nodeagent")
		if err != nil {
			return err
		}
		unresolved = nil
		found := false
		sc := bufio.NewScanner(strings.NewReader(log))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Msg == msgPinned && l.PodUID == podUID:
				pinned, found = l, true
			case l.Msg == msgUnresolved && strings.HasPrefix(l.Container, podUID+"/"):
				unresolved = append(unresolved, sc.Text())
			}
		}
		if !found {
			return fmt.Errorf("no %q line for pod UID %s in the agent's log", msgPinned, podUID)
		}
		return nil
	})
	return pinned, unresolved
}
