package objectives

import (
	"context"
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective"
)

// target is the workload an objective resizes, as read this period.
type target struct {
	kind      v1alpha1.TargetKind
	name      string
	namespace string
	// replicas is the workload's spec.replicas.
	replicas int32
	// pods are the pods the workload controls that are not being deleted, oldest first as
	// listed.
	pods []*corev1.Pod
}

// readTarget reads the objective's Deployment or StatefulSet and the pods it controls: for a
// Deployment, pods whose controller is one of the Deployment's ReplicaSets; for a StatefulSet,
// pods it controls itself. Look-alike pods matching the selector are not the target's.
func (c *Controller) readTarget(ctx context.Context, obj *v1alpha1.ServiceObjective) (*target, error) {
	ns, ref := obj.Namespace, obj.Spec.TargetRef
	t := &target{kind: ref.Kind, name: ref.Name, namespace: ns}
	var selector *metav1.LabelSelector
	var uid types.UID
	switch ref.Kind {
	case v1alpha1.TargetStatefulSet:
		s, err := c.kube.AppsV1().StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read StatefulSet %s/%s: %w", ns, ref.Name, err)
		}
		selector, uid, t.replicas = s.Spec.Selector, s.UID, replicasOf(s.Spec.Replicas)
	default:
		d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read Deployment %s/%s: %w", ns, ref.Name, err)
		}
		selector, uid, t.replicas = d.Spec.Selector, d.UID, replicasOf(d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s has a bad selector: %w", ref.Kind, ns, ref.Name, err)
	}
	owners := map[types.UID]bool{uid: true}
	if ref.Kind == v1alpha1.TargetDeployment {
		owners = map[types.UID]bool{}
		sets, err := c.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("list the ReplicaSets of Deployment %s/%s: %w", ns, ref.Name, err)
		}
		for i := range sets.Items {
			if controlledBy(&sets.Items[i].ObjectMeta, uid) {
				owners[sets.Items[i].UID] = true
			}
		}
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ref := metav1.GetControllerOf(p); ref != nil && owners[ref.UID] {
			t.pods = append(t.pods, p)
		}
	}
	return t, nil
}

func controlledBy(m *metav1.ObjectMeta, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(m)
	return ref != nil && ref.UID == uid
}

// replicasOf is a workload's spec.replicas, 1 when unset as the API server defaults it.
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Why a pod cannot take a size in place (the reasons of the SizeApplied condition).
const (
	ReasonApplied           = "Applied"
	ReasonResizeInfeasible  = "ResizeInfeasible"
	ReasonResizeDeferred    = "ResizeDeferred"
	ReasonResizeInProgress  = "ResizeInProgress"
	ReasonResizeFailed      = "ResizeFailed"
	ReasonPodsNotGuaranteed = "PodsNotGuaranteed"
	ReasonScaleFailed       = "ScaleFailed"
	ReasonScaling           = "Scaling"
	ReasonTargetNotFound    = "TargetNotFound"
	ReasonTargetUnreadable  = "TargetUnreadable"
	ReasonResizeUnavailable = "ResizeUnavailable"
)

// podState is what a pod says about growing it in place.
type podState struct {
	// blocked: the pod cannot take a larger size now (its node has no room: the kubelet's
	// PodResizePending condition, Infeasible or Deferred; or it is not Guaranteed, so no resize
	// can give it a quota equal to its size).
	blocked bool
	reason  string
	message string
	// cpuMilli and memory are what the pod's first container runs with (the kubelet's report,
	// else its spec).
	cpuMilli, memory int64
}

// stateOf reads a pod's resize state.
func stateOf(p *corev1.Pod) podState {
	s := podState{}
	if len(p.Spec.Containers) == 0 {
		return s
	}
	ctr := &p.Spec.Containers[0]
	res := ctr.Resources
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.Name == ctr.Name && cs.Resources != nil {
			res = *cs.Resources
		}
	}
	s.cpuMilli, s.memory = res.Limits.Cpu().MilliValue(), res.Limits.Memory().Value()
	if p.Status.QOSClass != "" && p.Status.QOSClass != corev1.PodQOSGuaranteed {
		s.blocked, s.reason = true, ReasonPodsNotGuaranteed
		s.message = fmt.Sprintf("pod %s is %s: the loop resizes only Guaranteed pods (every container's requests equal to its limits for cpu and memory), since a resize may not change a pod's QoS class; give the template's containers equal requests and limits", p.Name, p.Status.QOSClass)
		s.cpuMilli, s.memory = ctr.Resources.Requests.Cpu().MilliValue(), ctr.Resources.Requests.Memory().Value()
		return s
	}
	for i := range p.Status.ContainerStatuses {
		if cs := &p.Status.ContainerStatuses[i]; cs.State.Running != nil && cs.Resources == nil {
			s.blocked, s.reason = true, ReasonResizeUnavailable
			s.message = fmt.Sprintf("the kubelet of node %s reports no resources of pod %s's containers, so it cannot resize them in place (InPlacePodVerticalScaling off there)", p.Spec.NodeName, p.Name)
			s.cpuMilli, s.memory = ctr.Resources.Limits.Cpu().MilliValue(), ctr.Resources.Limits.Memory().Value()
			return s
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible:
			s.blocked, s.reason = true, ReasonResizeInfeasible
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonDeferred:
			s.blocked, s.reason = true, ReasonResizeDeferred
		case c.Type == corev1.PodResizeInProgress && c.Reason == corev1.PodReasonError:
			s.reason = ReasonResizeFailed
		case c.Type == corev1.PodResizeInProgress:
			s.reason = ReasonResizeInProgress
		default:
			continue
		}
		s.message = fmt.Sprintf("pod %s on node %s: %s %s: %s", p.Name, p.Spec.NodeName, c.Type, c.Reason, c.Message)
	}
	return s
}

// wanted is the CPU and memory the first container of p should have for size: the size's, but a
// memory limit the API would refuse to lower in place (its memory resizePolicy is not
// RestartContainer) stays where it is until the pod is replaced.
func wanted(p *corev1.Pod, size objective.Size) (cpu, memory resource.Quantity) {
	cpu = *resource.NewMilliQuantity(size.CPUMilli, resource.DecimalSI)
	memory = *resource.NewQuantity(size.MemoryBytes, resource.BinarySI)
	ctr := &p.Spec.Containers[0]
	restarts := false
	for _, rp := range ctr.ResizePolicy {
		if rp.ResourceName == corev1.ResourceMemory && rp.RestartPolicy == corev1.RestartContainer {
			restarts = true
		}
	}
	if cur, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok && !restarts && cur.Cmp(memory) > 0 {
		memory = cur.DeepCopy()
	}
	return cpu, memory
}

// needsResize says whether p's first container lacks cpu and memory as both request and limit.
func needsResize(p *corev1.Pod, cpu, memory resource.Quantity) bool {
	r := &p.Spec.Containers[0].Resources
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		c, m := l[corev1.ResourceCPU], l[corev1.ResourceMemory]
		if c.Cmp(cpu) != 0 || m.Cmp(memory) != 0 {
			return true
		}
	}
	return false
}

// resizePatch is the strategic merge patch of the pods/resize subresource that gives container
// cpu and memory as both request and limit.
func resizePatch(container string, cpu, memory resource.Quantity) ([]byte, error) {
	list := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
	return json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": container, "resources": corev1.ResourceRequirements{Requests: list, Limits: list},
	}}}})
}

// resizePod resizes p's first container in place.
func (c *Controller) resizePod(ctx context.Context, p *corev1.Pod, cpu, memory resource.Quantity) error {
	patch, err := resizePatch(p.Spec.Containers[0].Name, cpu, memory)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		return fmt.Errorf("resize pod %s/%s to %s CPU, %s memory: %w", p.Namespace, p.Name, cpu.String(), memory.String(), err)
	}
	return nil
}

// scale sets the workload's replicas through its scale subresource; it returns whether it
// changed them.
func (c *Controller) scale(ctx context.Context, t *target, replicas int32) (bool, error) {
	var get func() (*autoscalingv1.Scale, error)
	var update func(*autoscalingv1.Scale) error
	if t.kind == v1alpha1.TargetStatefulSet {
		api := c.kube.AppsV1().StatefulSets(t.namespace)
		get = func() (*autoscalingv1.Scale, error) { return api.GetScale(ctx, t.name, metav1.GetOptions{}) }
		update = func(s *autoscalingv1.Scale) error {
			_, err := api.UpdateScale(ctx, t.name, s, metav1.UpdateOptions{})
			return err
		}
	} else {
		api := c.kube.AppsV1().Deployments(t.namespace)
		get = func() (*autoscalingv1.Scale, error) { return api.GetScale(ctx, t.name, metav1.GetOptions{}) }
		update = func(s *autoscalingv1.Scale) error {
			_, err := api.UpdateScale(ctx, t.name, s, metav1.UpdateOptions{})
			return err
		}
	}
	s, err := get()
	if err != nil {
		return false, fmt.Errorf("read the scale of %s %s/%s: %w", t.kind, t.namespace, t.name, err)
	}
	if s.Spec.Replicas == replicas {
		return false, nil
	}
	s.Spec.Replicas = replicas
	if err := update(s); err != nil {
		return false, fmt.Errorf("scale %s %s/%s to %d replicas: %w", t.kind, t.namespace, t.name, replicas, err)
	}
	return true, nil
}
