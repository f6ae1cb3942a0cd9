//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// TestNRIFailClosedWithoutPlugin: while the agent is off the node, containerd refuses to create a
// pinned worker (the default validator requires the plugin) yet starts a pod that tolerates the
// plugin's absence; once the agent is back, the kubelet's retry creates the worker pinned.
// It keeps the agent's DaemonSet off the node for a while and restores it.
func TestNRIFailClosedWithoutPlugin(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	if !e.failClosed {
		t.Skip("the cluster's containerd lets containers start without the plugin (NRI_FAIL_CLOSED=0)")
	}
	ns := c.Namespace(t)
	ctx := context.Background()
	ds := c.Client.AppsV1().DaemonSets(framework.SystemNamespace)
	setSelector := func(sel string) error {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":%s}}}}`, sel)
		_, err := ds.Patch(context.Background(), "finegrain-nodeagent", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := setSelector(`{"finegrain.dev/e2e-no-agent":"true"}`); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := setSelector("null"); err != nil {
				t.Errorf("restore the agent's DaemonSet: %v", err)
			}
		}
	}
	t.Cleanup(restore)
	framework.Eventually(t, "the agent to leave the node", agentReadyTimeout, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d agent pods left", len(pods.Items))
		}
		return nil
	})

	c.CreatePod(t, ns, workerPod("worker", "1", time.Second))
	ev := eventWith(t, c, ns, "worker", time.Minute, `required plugin "finegrain" not present`)
	t.Logf("without the plugin: %s: %s", ev.Reason, ev.Message)
	tolerant := framework.Pod("tolerant", framework.Container("main", framework.WorkerImage))
	tolerant.Annotations = map[string]string{nriAnnotation: "true"}
	c.CreatePod(t, ns, tolerant)
	c.WaitForPod(t, ns, "tolerant", "running", framework.PodStartTimeout, framework.Running)
	if pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "worker", metav1.GetOptions{}); err != nil || pod.Status.Phase != corev1.PodPending {
		t.Fatalf("the worker without the plugin: %v %v", observe.PodSummary(pod), err)
	}

	restore()
	deployAgent(t, c, true)
	waitNRIConnected(t)
	checkRanPinned(t, c, ns, "worker", 3*time.Minute)
}

// TestNRIPluginHungOrKilledMidCall: the agent is frozen (SIGSTOP) while the kubelet creates a
// pinned worker, so containerd's CreateContainer waits for the plugin. Hung: containerd gives up
// after its 2 s request timeout and drops the plugin, whose validation then fails; the agent,
// resumed, reconnects. Killed: the agent is killed (SIGKILL) while containerd waits for its
// answer; the validation fails on the closed connection and the kubelet restarts the agent. Either
// way containerd refuses the creation, the kubelet's retry creates the worker pinned, and it runs
// once, never unpinned. The refusal names the plugin as containerd saw it at that moment: the
// failed call of 10-finegrain, or (containerd 2, when the kubelet's retry comes before the agent
// is back) its default validator's "required plugin "finegrain" not present".
func TestNRIPluginHungOrKilledMidCall(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	for _, tc := range []struct {
		name string
		// then is what happens to the frozen agent once containerd waits for it; want is what
		// containerd then logs about the CreateContainer it relayed.
		then func(pid int) error
		want string
	}{
		{"hung", func(int) error { return nil }, "failed to handle CreateContainer request: context deadline exceeded"},
		{"killed", func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }, "failed to handle CreateContainer request: ttrpc: closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitNRIConnected(t)
			ns := c.Namespace(t)
			ctx := context.Background()
			agent, err := agentPod(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			pid, err := agentPID(agent)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			c.CreatePod(t, ns, workerPod("worker", "1", time.Second))
			e.waitContainerdLog(t, start, `for container name:\"worker\"`, framework.PodStartTimeout)
			if err := tc.then(pid); err != nil {
				t.Fatal(err)
			}
			line := e.waitContainerdLog(t, start, tc.want, 10*time.Second)
			t.Logf("containerd: %s", line)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			ev := eventWith(t, c, ns, "worker", time.Minute, "NRI adjustment", "finegrain")
			t.Logf("creation refused: %s: %s", ev.Reason, ev.Message)
			checkRanPinned(t, c, ns, "worker", 3*time.Minute)
			pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "worker", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n := pod.Status.ContainerStatuses[0].RestartCount; n != 0 {
				t.Errorf("the worker's container ran %d times, want once", n+1)
			}
		})
	}
}

// TestNRIContainerdRestart: containerd restarts (its containers keep running); the agent's plugin
// reconnects on its own and the next worker is pinned at creation.
func TestNRIContainerdRestart(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	ns := c.Namespace(t)
	ctx := context.Background()
	before, err := agentMetric(ctx, "finegrain_nodeagent_nri_connections_total")
	if err != nil {
		t.Fatal(err)
	}
	c.CreatePod(t, ns, framework.Pod("web", framework.Container("web", framework.WorkerImage)))
	c.WaitForPod(t, ns, "web", "running", framework.PodStartTimeout, framework.Running)

	e.restartContainerd(t, c)
	framework.Eventually(t, "the plugin to reconnect", time.Minute, func(ctx context.Context) error {
		n, err := agentMetric(ctx, "finegrain_nodeagent_nri_connections_total")
		if err != nil {
			return err
		}
		up, err := agentMetric(ctx, "finegrain_nodeagent_nri_connected")
		if err != nil {
			return err
		}
		if n <= before || up != 1 {
			return fmt.Errorf("connections %v (was %v), connected %v", n, before, up)
		}
		return nil
	})
	c.CreatePod(t, ns, workerPod("worker", "1", time.Second))
	checkRanPinned(t, c, ns, "worker", 2*time.Minute)
	c.WaitForPod(t, ns, "web", "running", 10*time.Second, framework.Running)
}

// TestNRICreatedWhileAPIServerDown: with the API server frozen (SIGSTOP), the kubelet restarts a
// pinned worker's container and it is created on its pin: first with the agent running (it knows
// the pod), then after the agent itself was killed and restarted during the outage (it starts from
// its checkpoint and answers for a pod it cannot ask the API server about).
func TestNRICreatedWhileAPIServerDown(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	ns := c.Namespace(t)
	ctx := context.Background()
	pod := workerPod("worker", "1", 500*time.Millisecond)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod = c.CreatePod(t, ns, pod)
	logs := filepath.Join(c.Dir, "pod-logs", fmt.Sprintf("%s_%s_%s", ns, pod.Name, pod.UID), "worker")
	first := runLog(t, logs, 0, time.Minute)
	pin, err := announcedPin(ctx, c, ns, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equals(pin) {
		t.Fatalf("first run on %s, pin %s", first, pin)
	}
	agent, err := agentPod(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	apid, err := agentPID(agent)
	if err != nil {
		t.Fatal(err)
	}

	thaw := e.freeze(t, "kube-apiserver")
	if got := runLog(t, logs, 1, 2*time.Minute); !got.Equals(pin) {
		t.Errorf("restarted during the outage, the worker first ran on %s, its pin is %s", got, pin)
	}
	if err := syscall.Kill(apid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := runLog(t, logs, 2, 4*time.Minute); !got.Equals(pin) {
		t.Errorf("restarted during the outage after the agent restarted, the worker first ran on %s, its pin is %s", got, pin)
	}
	thaw()
	framework.Eventually(t, "the node to be Ready again", 2*time.Minute, func(ctx context.Context) error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				for _, taint := range node.Spec.Taints {
					if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
						return fmt.Errorf("taint %s", taint.Key)
					}
				}
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready", c.NodeName)
	})
}

// runLog waits for the kubelet's log file of the container's n-th run (dir/n.log, written
// without the API server) to hold fgworker's whole output, and returns the first affinity.
func runLog(t *testing.T, dir string, n int, timeout time.Duration) (first cpuset.CPUSet) {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("%d.log", n))
	framework.Eventually(t, "run "+name, timeout, func(context.Context) error {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		set, err := firstAffinity(criLogStdout(string(data)))
		if err != nil {
			return err
		}
		first = set
		return nil
	})
	return first
}

// criLogStdout joins the stdout of a CRI log file ("TIME STREAM P|F CONTENT" lines).
func criLogStdout(data string) string {
	var b strings.Builder
	for _, line := range strings.Split(data, "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || f[1] != "stdout" {
			continue
		}
		b.WriteString(f[3])
		if f[2] == "F" {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
