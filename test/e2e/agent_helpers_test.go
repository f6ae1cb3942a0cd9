//go:build e2e

// Helpers of the node agent's cases (agent_*_test.go): deploying the DaemonSet from the local
// overlay, pinned pods, reading what every container cgroup carries, and finding the agent's
// process.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

const (
	agentSelector = "app.kubernetes.io/name=finegrain-nodeagent"
	agentEndpoint = "http://127.0.0.1:9720"
	// metricsEndpoint is the agent's --metrics-address (daemonset/nodeagent/daemonset.yaml).
	metricsEndpoint = "http://127.0.0.1:9721"
	// agentReadyTimeout covers a fresh agent's start: image already local, pod list at once.
	agentReadyTimeout = 90 * time.Second
)

// freshAgent makes the first deployment of a test binary restart the agent, so that it runs the
// image this run built rather than one a previous run left (the tag stays :dev).
var freshAgent sync.Once

// deployAgent applies the local overlay and waits for the agent's pod; with ready it waits for
// readiness too. It returns the agent's pod.
func deployAgent(t *testing.T, c *framework.Cluster, ready bool) *corev1.Pod {
	t.Helper()
	c.ApplyKustomize(t, "hack/cluster/overlay")
	freshAgent.Do(func() {
		err := c.Client.CoreV1().Pods(framework.SystemNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: agentSelector})
		if err != nil {
			t.Fatalf("restart the agent: %v", err)
		}
	})
	var pod *corev1.Pod
	framework.Eventually(t, "the node agent's pod to run", agentReadyTimeout, func(ctx context.Context) error {
		p, err := agentPod(ctx, c)
		if err != nil {
			return err
		}
		if ok, _ := framework.Running(p); !ok {
			return fmt.Errorf("agent pod is %s", observe.PodSummary(p))
		}
		if ready && !podReady(p) {
			return fmt.Errorf("agent pod %s is not ready", p.Name)
		}
		pod = p
		return nil
	})
	return pod
}

// removeFinegrain deletes what the local overlay runs — the node agent's DaemonSet and the
// placer's Deployment — and waits until their pods are gone, so that later tests of the pass get
// the node's CPUs back (a static-policy kubelet has one to give).
func removeFinegrain(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	policy := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &policy}
	apps := c.Client.AppsV1()
	if err := apps.DaemonSets(framework.SystemNamespace).Delete(ctx, "finegrain-nodeagent", del); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove the node agent: %v", err)
	}
	if err := apps.Deployments(framework.SystemNamespace).Delete(ctx, "finegrain-placer", del); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove the placer: %v", err)
	}
	framework.Eventually(t, "the pods of namespace "+framework.SystemNamespace+" to go", framework.PodDeleteTimeout, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left, e.g. %s", n, pods.Items[0].Name)
		}
		return nil
	})
}

// agentPod returns the agent's only live pod.
func agentPod(ctx context.Context, c *framework.Cluster) (*corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("%d live agent pods, want 1", len(live))
	}
	return &live[0], nil
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pinnedPod is a Guaranteed pod asking for cpus exclusive CPUs through the opt-in label.
func pinnedPod(name string, cpus string, command ...string) *corev1.Pod {
	ctr := framework.Container("worker", framework.WorkerImage, command...)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse("32Mi")}
	ctr.Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	pod := framework.Pod(name, ctr)
	pod.Labels = map[string]string{"finegrain.dev/pinning": "exclusive"}
	return pod
}

// cpusetOf reads a container's cpuset.cpus and cpuset.mems.
func cpusetOf(pod *corev1.Pod, container string) (cpus, mems cpuset.CPUSet, dir string, err error) {
	dir, err = framework.ContainerCgroup(framework.CgroupRoot, pod, container, "cpuset")
	if err != nil {
		return cpus, mems, dir, err
	}
	for _, f := range []struct {
		name string
		dst  *cpuset.CPUSet
	}{{"cpuset.cpus", &cpus}, {"cpuset.mems", &mems}} {
		v, err := framework.ReadCgroupFile(dir, f.name)
		if err != nil {
			return cpus, mems, dir, err
		}
		if *f.dst, err = cpuset.Parse(v); err != nil {
			return cpus, mems, dir, fmt.Errorf("%s/%s: %w", dir, f.name, err)
		}
	}
	return cpus, mems, dir, nil
}

// waitPinned waits until the pod's worker container carries one NUMA node's exclusive CPUs of the
// requested count and returns them.
func waitPinned(t *testing.T, c *framework.Cluster, ns, name string, n int) (*corev1.Pod, cpuset.CPUSet) {
	t.Helper()
	pod := c.WaitForPod(t, ns, name, "running", framework.PodStartTimeout, framework.Running)
	var pin cpuset.CPUSet
	framework.Eventually(t, "the agent to pin "+name, 10*time.Second, func(context.Context) error {
		cpus, mems, dir, err := cpusetOf(pod, "worker")
		if err != nil {
			return err
		}
		if cpus.Size() != n || mems.Size() != 1 {
			return fmt.Errorf("%s carries cpus %s mems %s, want %d CPUs of one NUMA node", dir, cpus, mems, n)
		}
		pin = cpus
		return nil
	})
	return pod, pin
}

// containerCgroups lists every container cgroup below kubepods with what it carries.
func containerCgroups() ([]cgroup.Container, error) {
	m, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	l, err := cgroup.NewLayout(m, cgroup.Cgroupfs, "")
	if err != nil {
		return nil, err
	}
	fs, err := cgroup.NewFS(l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	return fs.Enumerate()
}

// othersExclude checks that every container cgroup except those of pod skip (its worker) avoids
// the pinned CPUs.
func othersExclude(pin cpuset.CPUSet, except string) error {
	cgs, err := containerCgroups()
	if err != nil {
		return err
	}
	for _, cg := range cgs {
		if cg.Ref.Container.ID == except {
			continue
		}
		if cg.CPUs.Intersection(pin).Size() > 0 {
			return fmt.Errorf("container cgroup %s carries %s, overlapping the pin %s", cg.Dir, cg.CPUs, pin)
		}
	}
	return nil
}

// agentPID returns the agent process's PID on the host, from its container's cgroup.
func agentPID(pod *corev1.Pod) (int, error) {
	dir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "nodeagent", "cpuset")
	if err != nil {
		return 0, err
	}
	procs, err := framework.ReadCgroupFile(dir, "cgroup.procs")
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(procs), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		return 0, fmt.Errorf("%s/cgroup.procs reads %q: %w", dir, procs, err)
	}
	comm, _ := os.ReadFile(filepath.Join("/proc", first, "comm"))
	if strings.TrimSpace(string(comm)) != "nodeagent" {
		return 0, fmt.Errorf("process %d in the agent's cgroup is %q, not nodeagent", pid, comm)
	}
	return pid, nil
}

// killAgent sends SIGKILL to the agent and waits for the kubelet to have restarted it.
func killAgent(t *testing.T, c *framework.Cluster) {
	t.Helper()
	pod, err := agentPod(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := agentPID(pod)
	if err != nil {
		t.Fatal(err)
	}
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	framework.Eventually(t, "the kubelet to restart the killed agent", agentReadyTimeout, func(ctx context.Context) error {
		p, err := agentPod(ctx, c)
		if err != nil {
			return err
		}
		if p.Status.ContainerStatuses[0].RestartCount <= restarts || !podReady(p) {
			return fmt.Errorf("agent pod is %s, restarts %d", observe.PodSummary(p), p.Status.ContainerStatuses[0].RestartCount)
		}
		return nil
	})
}

// agentGet fetches one of the agent's endpoints on the node's loopback.
func agentGet(ctx context.Context, path string) (int, string, error) {
	return httpGet(ctx, agentEndpoint+path)
}

// httpGet fetches url and returns the status and up to 1 MiB of the body.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// agentPins asks the agent's /pins endpoint.
func agentPins(ctx context.Context) (inspect.Pins, error) {
	return inspect.Fetch(ctx, http.DefaultClient, agentEndpoint)
}

// awaitNoPins waits until the agent holds no exclusive pin: a pin of an earlier test's pod is
// released when the agent learns the pod is gone, which may come just after the API object went.
func awaitNoPins(t *testing.T) {
	t.Helper()
	framework.Eventually(t, "the agent to release the pins of earlier tests", 30*time.Second, func(ctx context.Context) error {
		v, err := agentPins(ctx)
		if err != nil {
			return err
		}
		for _, c := range v.Containers {
			if c.Pool == inspect.PoolExclusive {
				return fmt.Errorf("%s/%s container %s still holds CPUs %s", c.Namespace, c.Pod, c.Container, c.CPUs)
			}
		}
		return nil
	})
}

// pinnedIn reports whether the view shows pod's container holding exactly cpus exclusively.
func pinnedIn(v inspect.Pins, pod, container string, cpus cpuset.CPUSet) bool {
	for _, c := range v.Containers {
		if c.Pod == pod && c.Container == container && c.Pool == inspect.PoolExclusive && c.CPUs == cpus.String() {
			return true
		}
	}
	return false
}

// onlineCPUs is the machine's CPU set.
func onlineCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	set, err := cpuset.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// podEvents returns the reasons and messages of the events about a pod.
func podEvents(ctx context.Context, c *framework.Cluster, ns, name string) ([]corev1.Event, error) {
	list, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
