package vcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/slurm/clusterconf"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

var everything = labels.Everything()

// Reasons of the Ready condition.
const (
	ReasonReady                = "Ready"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonSharedVolume         = "SharedVolumeUnusable"
	ReasonNoNodes              = "NoNodes"
	ReasonNoPorts              = "NoPorts"
	ReasonConfigError          = "ConfigError"
	ReasonNotOwned             = "NotOwned"
	ReasonControllerNotReady   = "ControllerNotReady"
	ReasonSlurmctldUnreachable = "SlurmctldUnreachable"
	ReasonNodesNotReady        = "NodesNotReady"
)

// errGone says the virtual cluster no longer exists: nothing to do, and no reason to look again.
var errGone = errors.New("virtual cluster gone")

// errNotOwned marks an object of a virtual cluster's name that the virtual cluster does not own.
var errNotOwned = errors.New("not owned")

// reconcile brings one virtual cluster's objects to what its spec and the nodes say and writes
// its status, in steps: 1. read and validate it; 2. the nodes it spans and its ports; 3. its
// generated configuration; 4. its Secrets and ConfigMap; 5. its pods; 6. what its Slurm says.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	obj, err := c.clusters.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return errGone
	}
	if err != nil {
		return err
	}
	vc, err := decode(obj)
	if err != nil {
		c.log.Info("virtual cluster unreadable", "virtualCluster", key, "err", err)
		return nil
	}
	// Being deleted: the garbage collector deletes its objects (first, under foreground
	// deletion); making them again would hold the deletion up.
	if vc.DeletionTimestamp != nil {
		return errGone
	}
	// 1. The spec.
	status := vc.Status.DeepCopy()
	status.ObservedGeneration = vc.Generation
	v1alpha1.SetVirtualClusterDefaults(&vc.Spec)
	if errs := v1alpha1.ValidateVirtualCluster(vc); len(errs) > 0 {
		return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonInvalidSpec, errs.ToAggregate().Error())
	}
	if vc.Spec.SharedVolume != nil {
		msg, err := c.sharedVolumeProblem(ctx, vc)
		if err != nil {
			return err
		}
		if msg != "" {
			return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonSharedVolume, msg)
		}
	}
	// 2. Nodes and ports.
	nodes, err := c.spannedNodes(vc)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonNoNodes,
			fmt.Sprintf("no schedulable node matches nodeSelector %v: label nodes to match it, or change it", vc.Spec.NodeSelector))
	}
	ports, err := c.assignPorts(vc, nodes)
	if err != nil {
		return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonNoPorts, err.Error())
	}
	status.Ports = &ports
	status.ControllerNode = controllerNode(status.ControllerNode, nodes)
	// 3. The configuration.
	cluster, err := c.clusterOf(vc, nodes, status.ControllerNode, ports)
	if err != nil {
		return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonConfigError, err.Error())
	}
	files, err := clusterconf.Generate(cluster)
	if err != nil {
		return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonConfigError, err.Error())
	}
	status.ConfigHash = configHash(files, vc.Spec.SharedVolume)
	// 4. and 5. The objects.
	if err := c.ensureObjects(ctx, vc, files, status.ConfigHash, ports, nodes, status.ControllerNode); err != nil {
		if errors.Is(err, errNotOwned) {
			c.recorder.Eventf(eventObject(vc), nil, corev1.EventTypeWarning, ReasonNotOwned, "Reconcile", "%v", err)
			return c.finish(ctx, vc, status, metav1.ConditionFalse, ReasonNotOwned, err.Error())
		}
		return err
	}
	// 6. Slurm's view.
	readyStatus, reason, msg := c.observe(ctx, vc, status, nodes)
	return c.finish(ctx, vc, status, readyStatus, reason, msg)
}

// decode converts the informer's object into a VirtualCluster.
func decode(obj runtime.Object) (*v1alpha1.VirtualCluster, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("informer gave a %T", obj)
	}
	var vc v1alpha1.VirtualCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vc); err != nil {
		return nil, fmt.Errorf("decode VirtualCluster %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &vc, nil
}

// spannedNodes are the schedulable nodes the node selector matches, by name.
func (c *Controller) spannedNodes(vc *v1alpha1.VirtualCluster) ([]*corev1.Node, error) {
	all, err := c.nodes.List(labels.SelectorFromSet(vc.Spec.NodeSelector))
	if err != nil {
		return nil, err
	}
	var out []*corev1.Node
	for _, n := range all {
		if !n.Spec.Unschedulable && n.DeletionTimestamp == nil {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// controllerNode keeps slurmctld where it was while that node is spanned; otherwise the first
// node by name.
func controllerNode(current string, nodes []*corev1.Node) string {
	if slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return n.Name == current }) {
		return current
	}
	return nodes[0].Name
}

// clusterOf describes the virtual cluster for clusterconf: each node's address from its status,
// its CPU layout from its NodeResourceTopology (the agent's), its memory from the kubelet's
// capacity (MemTotal, what slurmd measures).
func (c *Controller) clusterOf(vc *v1alpha1.VirtualCluster, nodes []*corev1.Node, ctlNode string, ports v1alpha1.VirtualClusterPorts) (clusterconf.Cluster, error) {
	cl := clusterconf.Cluster{Name: vc.Name, Namespace: vc.Namespace, Ports: ports, Partitions: vc.Spec.Partitions}
	for _, n := range nodes {
		node, err := c.nodeOf(n)
		if err != nil {
			return cl, err
		}
		cl.Nodes = append(cl.Nodes, node)
		if n.Name == ctlNode {
			cl.ControllerAddr = node.Addr
		}
	}
	return cl, nil
}

func (c *Controller) nodeOf(n *corev1.Node) (clusterconf.Node, error) {
	node := clusterconf.Node{Name: n.Name}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && node.Addr == "" {
			node.Addr = a.Address
		}
	}
	if node.Addr == "" {
		return node, fmt.Errorf("node %s reports no InternalIP address: the virtual cluster's daemons reach each other there", n.Name)
	}
	cpu, mem := n.Status.Capacity[corev1.ResourceCPU], n.Status.Capacity[corev1.ResourceMemory]
	node.CPUs, node.RealMemoryMiB = int(cpu.Value()), mem.Value()/(1<<20)
	if obj, err := c.nrts.Get(n.Name); err == nil {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if s, cps, tpc, ok := layoutOf(u); ok {
				node.Sockets, node.CoresPerSocket, node.ThreadsPerCore = s, cps, tpc
				node.CPUs = s * cps * tpc
			}
		}
	}
	return node, nil
}

// layoutOf reads the agent's CPU layout attributes of a NodeResourceTopology object; ok is false
// when one is missing or not a positive number (an older agent: slurm.conf then gives CPUs
// alone).
func layoutOf(u *unstructured.Unstructured) (sockets, coresPerSocket, threadsPerCore int, ok bool) {
	attrs, _, _ := unstructured.NestedSlice(u.Object, "attributes")
	values := map[string]int{}
	for _, a := range attrs {
		m, isMap := a.(map[string]any)
		if !isMap {
			continue
		}
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		if q, err := resource.ParseQuantity(value); err == nil && q.Value() > 0 && q.Value() < 1<<20 {
			values[name] = int(q.Value())
		}
	}
	sockets, coresPerSocket, threadsPerCore = values[nrt.AttrSockets], values[nrt.AttrCoresPerSocket], values[nrt.AttrThreadsPerCore]
	return sockets, coresPerSocket, threadsPerCore, sockets > 0 && coresPerSocket > 0 && threadsPerCore > 0
}

// configHash identifies what a pod cannot take up while it runs: the generated files its daemons
// read when they start, and its shared volume. A pod made from another is replaced. Without a
// shared volume the hash is that of the files alone.
func configHash(files clusterconf.Files, sv *v1alpha1.SharedVolume) string {
	h := sha256.New()
	for _, k := range []string{layout.SlurmConfKey, layout.CgroupConfKey, layout.SSHConfigKey} {
		fmt.Fprintf(h, "%s\x00%s\x00", k, files[k])
	}
	if sv != nil {
		fmt.Fprintf(h, "sharedVolume\x00%s\x00%s\x00", sv.ClaimName, sv.MountPath)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// sharedVolumeProblem says what keeps the virtual cluster's pods from mounting its shared volume,
// "" when nothing does: the claim missing from the namespace, or without the access mode
// ReadWriteMany that mounting it on every spanned node at once takes.
func (c *Controller) sharedVolumeProblem(ctx context.Context, vc *v1alpha1.VirtualCluster) (string, error) {
	sv := vc.Spec.SharedVolume
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(vc.Namespace).Get(ctx, sv.ClaimName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("spec.sharedVolume: PersistentVolumeClaim %s/%s does not exist: create it with access mode ReadWriteMany, or remove spec.sharedVolume", vc.Namespace, sv.ClaimName), nil
	}
	if err != nil {
		return "", fmt.Errorf("read the shared volume's PersistentVolumeClaim %s/%s: %w", vc.Namespace, sv.ClaimName, err)
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		return fmt.Sprintf("spec.sharedVolume: PersistentVolumeClaim %s/%s has access modes %v: the pods on every spanned node mount it at once, which takes ReadWriteMany", vc.Namespace, sv.ClaimName, pvc.Spec.AccessModes), nil
	}
	return "", nil
}
