//go:build e2e

// Gangs the standard way on the real cluster: plain pods labelled scheduling.x-k8s.io/pod-group
// with a PodGroup (scheduling.x-k8s.io/v1alpha1) are bound all-or-nothing by the placer, which
// reports the group's phase; a group whose minMember pods cannot fit together binds none; pods
// with finegrain's older label still form a gang, with a deprecation event.
package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// gangPod is a pod for the placer in group (through label) requesting cpu, pinned when asked.
func gangPod(name, label, group string, cpu resource.Quantity, pinned bool) *corev1.Pod {
	ctr := framework.Container("main", framework.WorkerImage)
	ctr.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	pod := framework.Pod(name, ctr)
	pod.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	pod.Labels = map[string]string{label: group}
	if pinned {
		pod.Labels[v1alpha1.LabelPinning] = v1alpha1.PinningExclusive
	}
	return pod
}

func createPodGroup(t *testing.T, c *framework.Cluster, ns, name string, minMember int32) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": schedv1alpha1.GroupName + "/" + schedv1alpha1.Version, "kind": schedv1alpha1.Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"minMember": int64(minMember)},
	}}
	if _, err := c.Dynamic.Resource(schedv1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s/%s: %v", ns, name, err)
	}
}

func podGroupPhase(ctx context.Context, c *framework.Cluster, ns, name string) (schedv1alpha1.PodGroupStatus, error) {
	u, err := c.Dynamic.Resource(schedv1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return schedv1alpha1.PodGroupStatus{}, err
	}
	pg, err := schedv1alpha1.FromUnstructured(u)
	if err != nil {
		return schedv1alpha1.PodGroupStatus{}, err
	}
	return pg.Status, nil
}

// eventFor waits for an event of reason on pod.
func eventFor(t *testing.T, c *framework.Cluster, ns, pod, reason string) {
	t.Helper()
	framework.Eventually(t, "a "+reason+" event on pod "+pod, placerTimeout, func(ctx context.Context) error {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=" + pod})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no %s event on %s yet", reason, pod)
		}
		return nil
	})
}

func TestPodGroupBindsWholeOrNothing(t *testing.T) {
	c, free := deployPlacer(t)
	c.RequireCPUManagerPolicy(t, "none")
	framework.Eventually(t, "the PodGroup CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(schedv1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
	ns := c.Namespace(t)

	// A group of two shared-pool pods, minMember 2: both run, and the group reports Running.
	createPodGroup(t, c, ns, "pair", 2)
	for i := range 2 {
		c.CreatePod(t, ns, gangPod(fmt.Sprintf("pair-%d", i), schedv1alpha1.LabelPodGroup, "pair", resource.MustParse("10m"), false))
	}
	for i := range 2 {
		c.WaitForPod(t, ns, fmt.Sprintf("pair-%d", i), "running", placerTimeout, framework.Running)
	}
	framework.Eventually(t, "PodGroup pair Running with 2 pods", placerTimeout, func(ctx context.Context) error {
		s, err := podGroupPhase(ctx, c, ns, "pair")
		if err != nil {
			return err
		}
		if s.Phase != schedv1alpha1.PhaseRunning || s.Running != 2 || s.ScheduleStartTime == nil {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// Two pods of a NUMA node's worth of pinned CPUs each, minMember 2: they cannot fit
	// together, and neither is bound although one would fit.
	createPodGroup(t, c, ns, "big", 2)
	q := *resource.NewQuantity(int64(free), resource.DecimalSI)
	for i := range 2 {
		c.CreatePod(t, ns, gangPod(fmt.Sprintf("big-%d", i), schedv1alpha1.LabelPodGroup, "big", q, true))
	}
	eventFor(t, c, ns, "big-0", controller.ReasonUnschedulable)
	framework.Consistently(t, "no pod of group big bound and the group Pending", 5*time.Second, func(ctx context.Context) error {
		for i := range 2 {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("big-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Spec.NodeName != "" {
				return fmt.Errorf("pod %s bound to %s", p.Name, p.Spec.NodeName)
			}
		}
		s, err := podGroupPhase(ctx, c, ns, "big")
		if err != nil {
			return err
		}
		if s.Phase != schedv1alpha1.PhasePending {
			return fmt.Errorf("PodGroup big phase %q, want Pending", s.Phase)
		}
		return nil
	})

	// finegrain's older label still makes a gang, with a deprecation warning on its pod.
	old := gangPod("old-0", schedv1alpha1.DeprecatedLabelPodGroup, "old", resource.MustParse("10m"), false)
	old.Labels[v1alpha1.LabelPodGroupMinAvailable] = "1"
	c.CreatePod(t, ns, old)
	c.WaitForPod(t, ns, "old-0", "running", placerTimeout, framework.Running)
	eventFor(t, c, ns, "old-0", controller.ReasonDeprecatedLabel)
}
