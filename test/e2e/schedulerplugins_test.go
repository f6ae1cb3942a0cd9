//go:build e2e

// The scheduler-plugins scheduler (NodeResourceTopologyMatch and Coscheduling, built from the
// module proxy by hack/scheduler-plugins/build.sh) beside finegrain: it reads the agent's
// NodeResourceTopology as it reads node-feature-discovery's, and the agent pins what it binds.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// schedulerPluginsEnv names the scheduler-plugins binary; hack/cluster/e2e.sh builds it and sets
// it. schedulerPluginsName is the profile (spec.schedulerName) the test runs it with.
const (
	schedulerPluginsEnv  = "FINEGRAIN_SCHEDULER_PLUGINS"
	schedulerPluginsName = "scheduler-plugins"
)

// schedulerPluginsConfig is the second scheduler's configuration: one profile with
// NodeResourceTopologyMatch (its cache on, resynced every 2 s, foreign pods tracked, the
// fingerprint method read from the object, the default dedicated pod informer) and Coscheduling
// (its queue sort instead of the default one), no leader election.
const schedulerPluginsConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %q
profiles:
  - schedulerName: %s
    plugins:
      queueSort:
        enabled: [{name: Coscheduling}]
        disabled: [{name: "*"}]
      multiPoint:
        enabled: [{name: Coscheduling}, {name: NodeResourceTopologyMatch}]
    pluginConfig:
      - name: NodeResourceTopologyMatch
        args:
          scoringStrategy: {type: LeastAllocated}
          cacheResyncPeriodSeconds: 2
          cache: {foreignPodsDetect: All, resyncMethod: Autodetect, informerMode: Dedicated, resyncScope: All}
      - name: Coscheduling
        args: {permitWaitingTimeSeconds: 30}
`

// schedulerPlugins is the second scheduler, a process of the test like the control plane's
// daemons, logging to a file at verbosity 4 (its filter's and cache's decisions).
type schedulerPlugins struct {
	log string
}

// schedulerPluginsBinary returns the binary $FINEGRAIN_SCHEDULER_PLUGINS names; it skips the
// test when there is none.
func schedulerPluginsBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(schedulerPluginsEnv)
	if bin == "" {
		t.Skipf("%s is not set: build the scheduler-plugins scheduler with hack/scheduler-plugins/build.sh and set %s to the kube-scheduler-plugins binary in the directory it prints (make e2e does both)", schedulerPluginsEnv, schedulerPluginsEnv)
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		t.Skipf("%s=%s is not the scheduler-plugins binary (%v): run hack/scheduler-plugins/build.sh", schedulerPluginsEnv, bin, err)
	}
	return bin
}

// startSchedulerPlugins runs bin with the admin kubeconfig until the test ends. The cluster must
// have the PodGroup CRD (daemonset/, deployed): Coscheduling waits for it.
func startSchedulerPlugins(t *testing.T, c *framework.Cluster, bin string) *schedulerPlugins {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, schedulerPluginsConfig, c.Kubeconfig, schedulerPluginsName), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &schedulerPlugins{log: filepath.Join(dir, "scheduler-plugins.log")}
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	// Its own loopback port: the cluster's kube-scheduler serves 10259.
	cmd := exec.Command(bin, "--config", config, "--bind-address", "127.0.0.1", "--secure-port", "10359", "--v", "4")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			t.Logf("scheduler-plugins log (last 60 lines of %s):\n%s", s.log, lastLines(s.log, 60))
		}
	})
	return s
}

// lines returns the log's lines from offset on, with the offset after them.
func (s *schedulerPlugins) lines(offset int64) ([]string, int64, error) {
	f, err := os.Open(s.log)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, offset, err
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
		offset += int64(len(sc.Bytes())) + 1
	}
	return out, offset, sc.Err()
}

func lastLines(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// guaranteedPod is a pod of one container whose CPU and memory requests equal its limits.
func guaranteedPod(name, cpu, memory string) *corev1.Pod {
	ctr := framework.Container("worker", framework.WorkerImage)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	ctr.Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	return framework.Pod(name, ctr)
}

var numaCell = regexp.MustCompile(`numaCell=(\d+)`)

// TestSchedulerPluginsBesideTheAgent: on a node of mixed pods (a Guaranteed pod in the shared
// pool, a Burstable one, the agent's own, all bound by other schedulers), the scheduler-plugins
// scheduler's NodeResourceTopology cache takes the node as unusable ("foreign" pods) until a
// resync finds the agent's pods fingerprint equal to the one it recomputes; it resyncs the node
// and never logs a mismatch. It then binds a Guaranteed pinned pod, its filter choosing a NUMA
// node, and the agent pins the pod on that node; a Guaranteed pod the NUMA node can no longer
// hold is refused by its filter ("cannot align container") and never reaches the node.
//
// On this machine's 2-CPU node the agent keeps one CPU shared, so the pinned pod takes the only
// CPU a zone offers and the zone's cpu available drops to 0. A whole-CPU request past that is
// refused by NodeResourcesFit first (the node's requests leave less than a CPU), so the refused
// pod asks for the zone's available plus half a CPU: it fits the node, and a Guaranteed pod's CPU
// must fit the zone.
func TestSchedulerPluginsBesideTheAgent(t *testing.T) {
	bin := schedulerPluginsBinary(t)
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgentOn(t, c)
	ns := c.Namespace(t)
	ctx := context.Background()
	c.DumpOnFailure(t, ns, "aligned", "unalignable")

	shared := guaranteedPod("guaranteed-shared", "100m", "32Mi")
	burstable := framework.Pod("burstable", framework.Container("worker", framework.WorkerImage))
	burstable.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	for _, p := range []*corev1.Pod{shared, burstable} {
		p.Spec.NodeName = c.NodeName
		framework.LocalDefaults(p)
		c.CreatePod(t, ns, p)
		c.WaitForPod(t, ns, p.Name, "running", framework.PodStartTimeout, framework.Running)
	}
	awaitPublishedFingerprint(t, c, "the mixed pods")

	sched := startSchedulerPlugins(t, c, bin)
	node := fmt.Sprintf(`node=%q`, c.NodeName)
	offset := sched.awaitResync(t, 0, node, "at start, the node holding pods of other schedulers")

	aligned := guaranteedPod("aligned", "1", "64Mi")
	aligned.Labels = map[string]string{"finegrain.dev/pinning": "exclusive"}
	aligned.Spec.SchedulerName = schedulerPluginsName
	aligned.Spec.NodeSelector = map[string]string{corev1.LabelHostname: c.NodeName}
	framework.LocalDefaults(aligned)
	c.CreatePod(t, ns, aligned)
	pod, _ := waitPinned(t, c, ns, "aligned", 1)
	if pod.Spec.NodeName != c.NodeName {
		t.Fatalf("aligned was bound to %q, want %s", pod.Spec.NodeName, c.NodeName)
	}

	// The NUMA node its filter expected, from its log, and the one the agent published the pin on.
	var want int
	framework.Eventually(t, "the filter's NUMA node for aligned in the scheduler's log", 10*time.Second, func(context.Context) error {
		lines, _, err := sched.lines(offset)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if strings.Contains(l, `"container aligned"`) && strings.Contains(l, fmt.Sprintf(`pod="%s/aligned"`, ns)) {
				if m := numaCell.FindStringSubmatch(l); m != nil {
					t.Logf("scheduler-plugins: %s", l)
					_, err := fmt.Sscan(m[1], &want)
					return err
				}
			}
		}
		return fmt.Errorf("no \"container aligned\" line for %s/aligned yet", ns)
	})
	var zoneAvailable int
	framework.Eventually(t, "the NodeResourceTopology to show aligned's pin", 10*time.Second, func(ctx context.Context) error {
		v, err := nrtView(ctx, c)
		if err != nil {
			return err
		}
		got := -1
		for _, ctr := range v.Containers {
			if ctr.Namespace == ns && ctr.Pod == "aligned" && ctr.NUMANode != nil {
				got = *ctr.NUMANode
			}
		}
		if got != want {
			return fmt.Errorf("aligned is pinned on NUMA node %d in the object, want %d (the filter's)", got, want)
		}
		for _, n := range v.NUMANodes {
			if n.ID == want {
				zoneAvailable = n.Available
			}
		}
		return nil
	})
	// Between aligned turning Running and the agent publishing that, a resync may see the pod
	// before the object does: that mismatch is the protocol working (the scheduler retries). From
	// here on the node's pods and its object hold still, and every check must match again.
	awaitPublishedFingerprint(t, c, "aligned running")
	_, offset, err := sched.lines(0)
	if err != nil {
		t.Fatal(err)
	}

	refusedCPU := fmt.Sprintf("%dm", zoneAvailable*1000+500)
	unalignable := guaranteedPod("unalignable", refusedCPU, "32Mi")
	unalignable.Labels = map[string]string{"finegrain.dev/pinning": "exclusive"}
	unalignable.Spec.SchedulerName = schedulerPluginsName
	unalignable.Spec.NodeSelector = map[string]string{corev1.LabelHostname: c.NodeName}
	framework.LocalDefaults(unalignable)
	c.CreatePod(t, ns, unalignable)
	framework.Eventually(t, "scheduler-plugins' filter to refuse unalignable", 30*time.Second, func(ctx context.Context) error {
		evs, err := podEvents(ctx, c, ns, "unalignable")
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Message, "cannot align container") {
				t.Logf("unalignable (%s CPU, zone available %d): %s %s: %s", refusedCPU, zoneAvailable, e.ReportingController, e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling event saying \"cannot align container\" (zone cpu available %d, request %s): %v", zoneAvailable, refusedCPU, evs)
	})
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "unalignable", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("unalignable: %v, bound to %q; the filter's refusal must keep it off the node", err, p.Spec.NodeName)
	}
	// The refusal marks the node for a resync: its fingerprint check must pass again.
	sched.awaitResync(t, offset, node, "after the refusal")
}

// deployAgentOn applies the local overlay and waits until the agent's pod on the cluster's node
// runs and is ready. Unlike deployAgent it ignores the DaemonSet's pods for other nodes: an
// earlier case's Node that is gone may leave one Pending for a while.
func deployAgentOn(t *testing.T, c *framework.Cluster) {
	t.Helper()
	c.ApplyKustomize(t, "hack/cluster/overlay")
	framework.Eventually(t, "the node agent on "+c.NodeName+" to be ready", agentReadyTimeout, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: agentSelector, FieldSelector: "spec.nodeName=" + c.NodeName})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ok, _ := framework.Running(p); ok && p.DeletionTimestamp == nil && podReady(p) {
				return nil
			}
		}
		return fmt.Errorf("no ready agent pod on %s among %d", c.NodeName, len(pods.Items))
	})
}

// awaitPublishedFingerprint waits until the node's object carries the fingerprint of the node's
// pods that scheduler-plugins counts.
func awaitPublishedFingerprint(t *testing.T, c *framework.Cluster, what string) {
	t.Helper()
	framework.Eventually(t, "the NodeResourceTopology's fingerprint to cover "+what, 10*time.Second, func(ctx context.Context) error {
		v, err := nrtView(ctx, c)
		if err != nil {
			return err
		}
		if fp, err := expectedFingerprint(ctx, c); err != nil || fp != v.Fingerprint {
			return fmt.Errorf("object fingerprint %s, the node's pods give %s (%v)", v.Fingerprint, fp, err)
		}
		return nil
	})
}

// awaitResync waits until the log from offset on shows a resync of the node (a fingerprint check
// that passed and replaced the cached object) and no failed check, and returns the offset after
// the lines read.
func (s *schedulerPlugins) awaitResync(t *testing.T, offset int64, node, when string) int64 {
	t.Helper()
	end := offset
	framework.Eventually(t, "scheduler-plugins to resync "+node+" "+when, 30*time.Second, func(context.Context) error {
		lines, next, err := s.lines(offset)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if strings.Contains(l, "fingerprint mismatch") || strings.Contains(l, "checking NodeTopology podset fingerprint") {
				return framework.Permanent(fmt.Errorf("scheduler-plugins' fingerprint check failed %s: %s", when, l))
			}
		}
		for _, l := range lines {
			if strings.Contains(l, `"overriding cached info"`) && strings.Contains(l, `reason="resynced"`) && strings.Contains(l, node) {
				t.Logf("scheduler-plugins %s: %s", when, l)
				end = next
				return nil
			}
		}
		return fmt.Errorf("no resync of %s logged yet", node)
	})
	return end
}

// expectedFingerprint is the fingerprint scheduler-plugins recomputes for the node: over its pods
// that nrt.CountsInFingerprint counts, read from the API server.
func expectedFingerprint(ctx context.Context, c *framework.Cluster) (string, error) {
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.NodeName})
	if err != nil {
		return "", err
	}
	var set []nrt.PodName
	for i := range pods.Items {
		if p := &pods.Items[i]; nrt.CountsInFingerprint(p) {
			set = append(set, nrt.PodName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return nrt.PodsFingerprint(set), nil
}
