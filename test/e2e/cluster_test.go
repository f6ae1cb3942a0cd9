//go:build e2e

// The local cluster itself: the node, local images, the in-cluster API path, the absence of a
// pod network, and the kubelet's static CPU manager policy (finegrain's baseline).
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"
)

func TestNodeIsReadyAndUntainted(t *testing.T) {
	c := framework.Setup(t)
	framework.Eventually(t, "node "+c.NodeName+" Ready without the not-ready taint", time.Minute, func(ctx context.Context) error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == "node.kubernetes.io/not-ready" {
				return fmt.Errorf("taint %s is still there (kube-controller-manager removes it)", taint.ToString())
			}
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		if v := node.Status.NodeInfo.KubeletVersion; v != "v1.33.13" {
			return fmt.Errorf("kubelet version %s, want v1.33.13 (hack/k8s/go.mod)", v)
		}
		return nil
	})
	cfg, err := c.KubeletConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CgroupDriver != "cgroupfs" || cfg.CPUManagerPolicy != c.CPUManagerPolicy {
		t.Errorf("kubelet runs cgroup driver %q and cpu-manager-policy %q; up.sh asked for cgroupfs and %q", cfg.CgroupDriver, cfg.CPUManagerPolicy, c.CPUManagerPolicy)
	}
}

func TestHostNetworkPodFromLocalImageRuns(t *testing.T) {
	c := framework.Setup(t)
	ns := c.Namespace(t)
	pod := c.CreatePod(t, ns, framework.Pod("idle", framework.Container("idle", framework.WorkerImage)))
	pod = c.WaitForPod(t, ns, pod.Name, "running", framework.PodStartTimeout, framework.Running)

	status := pod.Status.ContainerStatuses[0]
	if status.Image != framework.WorkerImage || !strings.HasPrefix(status.ImageID, "sha256:") {
		t.Errorf("container runs image %q (ID %q), want the locally imported %s", status.Image, status.ImageID, framework.WorkerImage)
	}
	if !pod.Spec.HostNetwork || pod.Status.PodIP != pod.Status.HostIP {
		t.Errorf("pod IP %s, host IP %s: want the host's network", pod.Status.PodIP, pod.Status.HostIP)
	}
	dir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "idle", "cpuset")
	if err != nil {
		t.Fatal(err)
	}
	procs, err := framework.ReadCgroupFile(dir, "cgroup.procs")
	if err != nil || procs == "" {
		t.Fatalf("container cgroup %s holds no process (%q, %v)", dir, procs, err)
	}

	c.DeletePod(t, ns, pod.Name)
	framework.Eventually(t, "the container's cgroup "+dir+" to be removed", 30*time.Second, func(context.Context) error {
		if _, err := framework.ReadCgroupFile(dir, "cgroup.procs"); err == nil {
			return fmt.Errorf("%s still exists", dir)
		}
		return nil
	})
}

func TestInClusterConfigWithServiceAccountToken(t *testing.T) {
	c := framework.Setup(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	sa, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "lister"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "list-pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lister-lists-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	run := func(name string, args ...string) (string, *corev1.ContainerStateTerminated) {
		pod := framework.Pod(name, framework.Container("lister", framework.WorkerImage, append([]string{"/usr/local/bin/podlister"}, args...)...))
		pod.Spec.ServiceAccountName = sa.Name
		c.CreatePod(t, ns, pod)
		done := c.WaitForPod(t, ns, name, "completed", framework.PodStartTimeout, framework.Completed)
		logs, err := c.PodLogs(ctx, ns, name, "lister")
		if err != nil {
			t.Fatal(err)
		}
		return logs, done.Status.ContainerStatuses[0].State.Terminated
	}

	logs, state := run("own-namespace")
	if state == nil || state.ExitCode != 0 || !strings.Contains(logs, "pod own-namespace\n") {
		t.Errorf("podlister in its own namespace: exit %+v, log %q; want exit 0 and its own pod listed", state, logs)
	}
	logs, state = run("other-namespace", "-namespace", "kube-system")
	if state == nil || state.ExitCode != 1 || !strings.Contains(logs, `cannot list resource "pods"`) || !strings.Contains(logs, "system:serviceaccount:"+ns+":lister") {
		t.Errorf("podlister in kube-system: exit %+v, log %q; want RBAC to refuse the service account", state, logs)
	}
}

func TestPodAskingForPodNetworkNeverGetsOne(t *testing.T) {
	c := framework.Setup(t)
	ns := c.Namespace(t)
	pod := framework.Pod("pod-network", framework.Container("idle", framework.WorkerImage))
	framework.LocalDefaults(pod)
	pod.Spec.HostNetwork = false
	created, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.DumpOnFailure(t, ns, created.Name)
	// The only CNI plugin is loopback: the runtime finds no pod interface and refuses the sandbox.
	framework.Eventually(t, "a FailedCreatePodSandBox event", framework.PodStartTimeout, func(ctx context.Context) error {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + created.Name})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "FailedCreatePodSandBox" {
				return nil
			}
		}
		return fmt.Errorf("%d events about the pod, none FailedCreatePodSandBox", len(events.Items))
	})
	got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodPending || got.Status.PodIP != "" {
		t.Errorf("pod is %s with IP %q; it must never run on a pod network", observe.PodSummary(got), got.Status.PodIP)
	}
	// The failed sandbox must not wedge the pod: it can still be deleted.
	c.DeletePod(t, ns, created.Name)
}

func TestStaticPolicyPinsGuaranteedPod(t *testing.T) {
	c := framework.Setup(t)
	c.RequireCPUManagerPolicy(t, "static")
	ns := c.Namespace(t)
	reserved, err := cpuset.Parse(c.ReservedCPUs)
	if err != nil {
		t.Fatalf("reserved CPUs %q in cluster.env: %v", c.ReservedCPUs, err)
	}

	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pinned := framework.Container("pinned", framework.WorkerImage)
	pinned.Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	pod := c.CreatePod(t, ns, framework.Pod("guaranteed", pinned))
	shared := c.CreatePod(t, ns, framework.Pod("besteffort", framework.Container("shared", framework.WorkerImage)))
	pod = c.WaitForPod(t, ns, pod.Name, "running", framework.PodStartTimeout, framework.Running)
	shared = c.WaitForPod(t, ns, shared.Name, "running", framework.PodStartTimeout, framework.Running)
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Fatalf("pod %s has QoS class %s, want Guaranteed", pod.Name, pod.Status.QOSClass)
	}

	pinnedDir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "pinned", "cpuset")
	if err != nil {
		t.Fatal(err)
	}
	sharedDir, err := framework.ContainerCgroup(framework.CgroupRoot, shared, "shared", "cpuset")
	if err != nil {
		t.Fatal(err)
	}
	var exclusive, pool cpuset.CPUSet
	// The kubelet writes the exclusive set right after the container starts (its reconcile
	// loop applies it to the shared containers too).
	framework.Eventually(t, "the kubelet to pin container pinned to one CPU outside the reserved "+reserved.String(), 30*time.Second, func(context.Context) error {
		cpus, err := framework.ReadCgroupFile(pinnedDir, "cpuset.cpus")
		if err != nil {
			return err
		}
		if exclusive, err = cpuset.Parse(cpus); err != nil {
			return fmt.Errorf("%s/cpuset.cpus = %q: %w", pinnedDir, cpus, err)
		}
		if exclusive.Size() != 1 || exclusive.Intersection(reserved).Size() != 0 {
			return fmt.Errorf("%s/cpuset.cpus = %s, want one CPU outside %s", pinnedDir, exclusive, reserved)
		}
		cpus, err = framework.ReadCgroupFile(sharedDir, "cpuset.cpus")
		if err != nil {
			return err
		}
		if pool, err = cpuset.Parse(cpus); err != nil {
			return fmt.Errorf("%s/cpuset.cpus = %q: %w", sharedDir, cpus, err)
		}
		if pool.Intersection(exclusive).Size() != 0 {
			return fmt.Errorf("shared container's cpuset.cpus %s still holds the exclusive CPU %s", pool, exclusive)
		}
		return nil
	})
	t.Logf("kubelet pinned %s/%s to CPU %s; the shared pool is %s", ns, pod.Name, exclusive, pool)

	cpuDir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "pinned", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	// With exclusive CPUs the kubelet lifts the CFS quota (DisableCPUQuotaWithExclusiveCPUs).
	if quota, err := framework.ReadCgroupFile(cpuDir, "cpu.cfs_quota_us"); err != nil || quota != "-1" {
		t.Errorf("pinned container's cpu.cfs_quota_us = %q (%v), want -1", quota, err)
	}
}
