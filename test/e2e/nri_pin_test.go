//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// TestNRIPinsAtCreation: through NRI the worker's container is created with its exclusive CPUs in
// its runtime spec, so its first affinity reading is the pin; the shared container already
// running is narrowed in containerd's spec by the same CreateContainer reply; the agent counts the
// pin on the nri path with a zero unpinned window.
func TestNRIPinsAtCreation(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	awaitNoPins(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	count0, _ := agentMetric(ctx, `finegrain_nodeagent_unpinned_window_seconds_count{path="nri"}`)
	sum0, _ := agentMetric(ctx, `finegrain_nodeagent_unpinned_window_seconds_sum{path="nri"}`)

	web := framework.Container("web", framework.WorkerImage)
	web.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	c.CreatePod(t, ns, framework.Pod("web", web))
	webPod := c.WaitForPod(t, ns, "web", "running", framework.PodStartTimeout, framework.Running)
	webID, err := framework.ContainerID(webPod, "web")
	if err != nil {
		t.Fatal(err)
	}
	all := onlineCPUs(t)
	if got, err := e.specCPUs(ctx, webID); err != nil || got != all.String() {
		t.Fatalf("shared container created with spec cpus %q (%v), want the whole shared pool %s", got, err, all)
	}

	c.CreatePod(t, ns, workerPod("worker", "1", 3*time.Second))
	running := c.WaitForPod(t, ns, "worker", "running", framework.PodStartTimeout, framework.Running)
	workerID, err := framework.ContainerID(running, "worker")
	if err != nil {
		t.Fatal(err)
	}
	pin, err := announcedPin(ctx, c, ns, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.specCPUs(ctx, workerID); err != nil || got != pin.String() {
		t.Errorf("worker's runtime spec holds cpus %q (%v), want its pin %s", got, err, pin)
	}
	if got, err := e.specCPUs(ctx, webID); err != nil || got != all.Difference(pin).String() {
		t.Errorf("after the pin the shared container's runtime spec holds cpus %q (%v), want %s", got, err, all.Difference(pin))
	}
	checkRanPinned(t, c, ns, "worker", time.Minute)

	framework.Eventually(t, "the agent to count the pin on the nri path", 10*time.Second, func(ctx context.Context) error {
		count, err := agentMetric(ctx, `finegrain_nodeagent_unpinned_window_seconds_count{path="nri"}`)
		if err != nil {
			return err
		}
		if count < count0+1 {
			return fmt.Errorf("nri window count %v, was %v", count, count0)
		}
		return nil
	})
	if sum, _ := agentMetric(ctx, `finegrain_nodeagent_unpinned_window_seconds_sum{path="nri"}`); sum != sum0 {
		t.Errorf("the nri path's unpinned window grew by %v s, want 0", sum-sum0)
	}
}

// TestNRITooLargeRefused: a pinned container asking for more CPUs than any NUMA node can give is
// never created; the agent's reason reaches the pod's events through the kubelet. On a machine
// with one NUMA node the scheduler never binds a request larger than the node, so the case raises
// the agent's shared-pool minimum to the whole machine: then any exclusive request is too large.
// It changes the agent's arguments and restores them.
func TestNRITooLargeRefused(t *testing.T) {
	c := framework.Setup(t)
	requireNRI(t, c)
	all := strconv.Itoa(onlineCPUs(t).Size())
	withAgentArgs(t, c, func(args []string) []string {
		args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--min-shared-cpus") })
		return append(args, "--min-shared-cpus="+all)
	})
	ns := c.Namespace(t)
	ctx := context.Background()
	before, _ := agentMetric(ctx, `finegrain_nodeagent_nri_refusals_total{reason="too-large"}`)
	c.CreatePod(t, ns, workerPod("huge", "1", time.Second))
	ev := eventWith(t, c, ns, "huge", time.Minute, "finegrain node agent refuses", `container "worker"`, "can never fit")
	t.Logf("event %s: %s", ev.Reason, ev.Message)
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil || s.State.Terminated != nil || s.ContainerID != "" {
			t.Errorf("the too-large container was created: %s", observe.PodSummary(pod))
		}
	}
	if after, _ := agentMetric(ctx, `finegrain_nodeagent_nri_refusals_total{reason="too-large"}`); after <= before {
		t.Errorf("too-large refusals %v -> %v", before, after)
	}
}

// TestNRIResizeKeepsPin: an in-place resize (the kubelet's UpdateContainerResources, NRI's
// UpdateContainer) changes the worker's memory limit and leaves it on its pin.
func TestNRIResizeKeepsPin(t *testing.T) {
	c := framework.Setup(t)
	e := requireNRI(t, c)
	ns := c.Namespace(t)
	ctx := context.Background()
	pod := pinnedPod("worker", "1")
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
	pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Mi")
	c.CreatePod(t, ns, pod)
	pod, pin := waitPinned(t, c, ns, "worker", 1)
	id, err := framework.ContainerID(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"containers":[{"name":"worker","resources":{"requests":{"memory":"96Mi"},"limits":{"memory":"96Mi"}}}]}}`
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "worker", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatalf("resize: %v", err)
	}
	dir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "worker", "memory")
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the kubelet to apply the resize", time.Minute, func(context.Context) error {
		limit, err := framework.ReadCgroupFile(dir, "memory.limit_in_bytes")
		if err != nil {
			return err
		}
		if limit != strconv.Itoa(96<<20) {
			return fmt.Errorf("memory limit %s", limit)
		}
		return nil
	})
	cpus, _, _, err := cpusetOf(pod, "worker")
	if err != nil || !cpus.Equals(pin) {
		t.Errorf("after the resize the worker's cgroup carries %s (%v), want its pin %s", cpus, err, pin)
	}
	if got, err := e.specCPUs(ctx, id); err != nil || got != pin.String() {
		t.Errorf("after the resize the worker's runtime spec holds %q (%v), want its pin %s", got, err, pin)
	}
	if err := othersExclude(pin, id); err != nil {
		t.Error(err)
	}
}
