//go:build e2e

// The node agent on the real cluster: the DaemonSet becomes ready, an opted-in pod's container
// gets exclusive cpus and mems while every other container cgroup avoids them, drift is repaired,
// and a request that cannot be pinned stays shared with an event.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

func TestAgentDaemonSetReady(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	pod := deployAgent(t, c, true)
	sc := pod.Spec.Containers[0].SecurityContext
	// Every capability dropped but SYS_NICE, which the local overlay adds for the Slurm virtual
	// clusters' confinement (daemonset/slurm-confinement).
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
		fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" || fmt.Sprint(sc.Capabilities.Add) != "[SYS_NICE]" {
		t.Errorf("agent container security context %+v, want unprivileged with every capability dropped but SYS_NICE", sc)
	}
	if psc := pod.Spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("agent pod security context %+v, want seccomp RuntimeDefault", psc)
	}
	ctx := context.Background()
	for _, path := range []string{"/healthz", "/readyz", "/pins", "/metrics"} {
		code, body, err := agentGet(ctx, path)
		if err != nil || code != 200 {
			t.Errorf("GET %s = %d %v\n%s", path, code, err, body)
		}
	}
	// The metrics for a cluster's Prometheus on the node's port 9721 (every address of the host,
	// whose network the one-node cluster's agent shares), and nothing else there.
	for path, want := range map[string]int{"/metrics": 200, "/pins": 404, "/processes": 404} {
		code, body, err := httpGet(ctx, metricsEndpoint+path)
		if err != nil || code != want || (want == 200 && !strings.Contains(body, "finegrain_nodeagent_")) {
			t.Errorf("GET %s%s = %d %v, want %d\n%.300s", metricsEndpoint, path, code, err, want, body)
		}
	}
	// With no pin, every container cgroup carries the whole machine.
	all := onlineCPUs(t)
	framework.Eventually(t, "every container cgroup to carry the shared pool", 10*time.Second, func(context.Context) error {
		cgs, err := containerCgroups()
		if err != nil {
			return err
		}
		for _, cg := range cgs {
			if !cg.CPUs.Equals(all) {
				return fmt.Errorf("%s carries %s, want %s with nothing pinned", cg.Dir, cg.CPUs, all)
			}
		}
		return nil
	})
}

func TestAgentPinsExclusivePod(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	c.CreatePod(t, ns, pinnedPod("pinned", "1"))
	pod, pin := waitPinned(t, c, ns, "pinned", 1)
	_, mems, dir, err := cpusetOf(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join("/sys/devices/system/node", fmt.Sprintf("node%d", mems.List()[0]), "cpulist")
	if data, err := os.ReadFile(node); err == nil {
		if nodeCPUs, err := cpuset.Parse(strings.TrimSpace(string(data))); err != nil || !pin.IsSubsetOf(nodeCPUs) {
			t.Errorf("%s: pin %s is not on NUMA node %s (%s)", dir, pin, mems, data)
		}
	}
	id, err := framework.ContainerID(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "every other container cgroup to avoid "+pin.String(), 5*time.Second, func(context.Context) error {
		return othersExclude(pin, id)
	})
	if v, err := agentPins(context.Background()); err != nil || !pinnedIn(v, "pinned", "worker", pin) {
		t.Errorf("/pins = %+v, %v; want pinned/worker holding %s", v, err, pin)
	}

	c.DeletePod(t, ns, pod.Name)
	all := onlineCPUs(t)
	framework.Eventually(t, "the shared pool to grow back after the release", 10*time.Second, func(context.Context) error {
		cgs, err := containerCgroups()
		if err != nil {
			return err
		}
		for _, cg := range cgs {
			if !cg.CPUs.Equals(all) {
				return fmt.Errorf("%s carries %s, want %s", cg.Dir, cg.CPUs, all)
			}
		}
		return nil
	})
}

func TestAgentRepairsDrift(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	c.CreatePod(t, ns, pinnedPod("drift", "1"))
	pod, pin := waitPinned(t, c, ns, "drift", 1)
	_, _, dir, err := cpusetOf(pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	all := onlineCPUs(t)
	for round := range 3 {
		if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(all.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		took := framework.Eventually(t, "the agent to repair "+dir, 5*time.Second, func(context.Context) error {
			cpus, _, _, err := cpusetOf(pod, "worker")
			if err != nil {
				return err
			}
			if !cpus.Equals(pin) {
				return fmt.Errorf("carries %s, want %s", cpus, pin)
			}
			return nil
		})
		t.Logf("round %d: drift of %s repaired after %s (the agent checks every 500 ms; bench/pinwindow measures it)", round, dir, took)
	}
}

func TestAgentFractionalRequestStaysShared(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "none")
	deployAgent(t, c, true)
	ns := c.Namespace(t)
	c.CreatePod(t, ns, pinnedPod("half", "500m"))
	pod := c.WaitForPod(t, ns, "half", "running", framework.PodStartTimeout, framework.Running)
	framework.Eventually(t, "a NotPinned event on the pod", 10*time.Second, func(ctx context.Context) error {
		evs, err := podEvents(ctx, c, ns, "half")
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "NotPinned" && strings.Contains(e.Message, "whole number") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none NotPinned", len(evs))
	})
	framework.Consistently(t, "the container to stay on every CPU", time.Second, func(context.Context) error {
		cpus, _, dir, err := cpusetOf(pod, "worker")
		if err != nil {
			return err
		}
		if !cpus.Equals(onlineCPUs(t)) {
			return fmt.Errorf("%s carries %s, want the shared pool (every CPU, nothing is pinned)", dir, cpus)
		}
		return nil
	})
}
