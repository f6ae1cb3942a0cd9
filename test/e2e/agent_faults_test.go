//go:build e2e

// The node agent under faults on the real cluster: kill -9 at any moment loses no pin,
// containers that exit or vanish are handled without crashing, and a kubelet running the static
// CPU manager policy makes the agent stand aside.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// TestAgentKill9KeepsPins kills the agent while a worker is pinned: the worker's cpuset never
// changes while the agent is down and restarts, and the restarted agent holds the same pin.
func TestAgentKill9KeepsPins(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	c.CreatePod(t, ns, pinnedPod("steady", "1"))
	pod, pin := waitPinned(t, c, ns, "steady", 1)

	var changed atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			cpus, _, _, err := cpusetOf(pod, "worker")
			if err == nil && !cpus.Equals(pin) {
				changed.Store(fmt.Sprintf("cpuset became %s at %s", cpus, time.Now().Format(time.StampMilli)))
			}
		}
	}()
	killAgent(t, c)
	time.Sleep(time.Second)
	close(stop)
	<-done
	if v := changed.Load(); v != nil {
		t.Fatalf("the pin %s did not survive kill -9: %s", pin, v)
	}
	id, err := framework.ContainerID(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if err := othersExclude(pin, id); err != nil {
		t.Error(err)
	}
	if v, err := agentPins(context.Background()); err != nil || !pinnedIn(v, "steady", "worker", pin) {
		t.Errorf("restarted agent's /pins = %+v, %v; want steady/worker holding %s", v, err, pin)
	}
}

// TestAgentKill9DuringAllocation kills the agent right after a worker is created, at several
// moments of its start (allocation, checkpoint, cgroup creation): each worker ends up pinned and
// no other container overlaps it.
func TestAgentKill9DuringAllocation(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	for i, delay := range []time.Duration{0, 30 * time.Millisecond, 300 * time.Millisecond} {
		name := fmt.Sprintf("racer-%d", i)
		c.CreatePod(t, ns, pinnedPod(name, "1"))
		time.Sleep(delay)
		killAgent(t, c)
		pod, pin := waitPinned(t, c, ns, name, 1)
		id, err := framework.ContainerID(pod, "worker")
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "other containers to avoid "+pin.String(), 5*time.Second, func(context.Context) error {
			return othersExclude(pin, id)
		})
		c.DeletePod(t, ns, name)
	}
}

// TestAgentContainerExitsEarly: a worker that exits at once (possibly before its pin) and a
// worker deleted while it starts leave the agent running and ready, and their CPUs come back.
func TestAgentContainerExitsEarly(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	agent := deployAgent(t, c, true)
	restarts := agent.Status.ContainerStatuses[0].RestartCount
	ns := c.Namespace(t)
	// podlister fails at once: there is no namespace "absent-namespace-x" it may list.
	c.CreatePod(t, ns, pinnedPod("quitter", "1", "/usr/local/bin/podlister", "-namespace", "absent-namespace-x", "-timeout", "1s"))
	c.WaitForPod(t, ns, "quitter", "finished", framework.PodStartTimeout, framework.Completed)
	c.CreatePod(t, ns, pinnedPod("ghost", "1"))
	time.Sleep(50 * time.Millisecond)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "ghost", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	all := onlineCPUs(t)
	framework.Eventually(t, "every CPU back in the shared pool", 30*time.Second, func(ctx context.Context) error {
		v, err := agentPins(ctx)
		if err != nil {
			return err
		}
		if v.SharedCPUs != all.String() {
			return fmt.Errorf("shared pool %s, want %s: %+v", v.SharedCPUs, all, v.Containers)
		}
		return nil
	})
	p, err := agentPod(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.ContainerStatuses[0].RestartCount != restarts || !podReady(p) {
		t.Errorf("agent pod is %s with %d restarts (had %d): it must survive vanishing containers",
			observe.PodSummary(p), p.Status.ContainerStatuses[0].RestartCount, restarts)
	}
}

// kubeletReconcilePeriod is the kubelet's cpuManagerReconcilePeriod (its default; the local
// cluster keeps it).
const kubeletReconcilePeriod = 10 * time.Second

// TestAgentRefusesStaticKubelet runs in the static pass: next to a kubelet that pins containers
// itself the agent stays unready, says why on the node, and writes no cgroup — a cpuset set by
// hand (which an acting agent repairs within a second) stays as it is. (A Guaranteed 1-CPU pod
// cannot take part: with CPU 0 reserved the node's allocatable is one CPU, and the agent's pod,
// system-node-critical, would preempt it.)
func TestAgentRefusesStaticKubelet(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "static")
	deployAgent(t, c, false)
	t.Cleanup(func() { removeFinegrain(t, c) })
	framework.Eventually(t, "the agent to report the static policy on its node and in /readyz", 30*time.Second, func(ctx context.Context) error {
		code, body, err := agentGet(ctx, "/readyz")
		if err != nil {
			return err
		}
		if code == 200 || !strings.Contains(body, "static") {
			return fmt.Errorf("/readyz = %d %s", code, body)
		}
		evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=KubeletStaticCPUPolicy"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no KubeletStaticCPUPolicy event on node %s", c.NodeName)
		}
		return nil
	})
	ns := c.Namespace(t)
	c.CreatePod(t, ns, framework.Pod("idle", framework.Container("worker", framework.WorkerImage)))
	pod := c.WaitForPod(t, ns, "idle", "running", framework.PodStartTimeout, framework.Running)
	_, _, dir, err := cpusetOf(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's static policy writes a new container's cpuset once, at its first reconcile
	// (every 10 s) after the container started, and never repairs it afterwards: write by hand
	// after that, so that only the agent could change it back.
	time.Sleep(kubeletReconcilePeriod + time.Second)
	hand := onlineCPUs(t).List()
	mine := cpuset.New(hand[len(hand)-1])
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(mine.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.Consistently(t, "the hand-written cpuset "+mine.String()+" to stay", 2*time.Second, func(context.Context) error {
		cpus, _, _, err := cpusetOf(pod, "worker")
		if err != nil {
			return err
		}
		if !cpus.Equals(mine) {
			return fmt.Errorf("%s changed from %s to %s: the agent wrote it", dir, mine, cpus)
		}
		return nil
	})
}
