package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Names that mark what the benchmark made; only objects carrying them are ever deleted.
const (
	benchLabel = "finegrain.dev/bench"
	benchValue = "placerscale"
	// poolLabel marks the nodes the gangs compete for.
	poolLabel = "finegrain.dev/bench-pool"
	poolGangs = "gangs"
	// kwokKey is kwok's node annotation (the nodes it manages) and the taint that keeps every
	// pod without the benchmark's toleration off the fake nodes.
	kwokKey   = "kwok.x-k8s.io/node"
	kwokValue = "fake"
	namespace = "placerscale"
)

var benchSelector = benchLabel + "=" + benchValue

// nodeName is the name of fake node i.
func nodeName(i int) string { return fmt.Sprintf("%s%04d", nodePrefix, i) }

const nodePrefix = "placerscale-"

// isFakeNode tells whether name is one that nodeName gives.
func isFakeNode(name string) bool {
	n, ok := strings.CutPrefix(name, nodePrefix)
	if !ok || len(n) != 4 {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// fakeNode is fake node i: numa NUMA nodes of cpus CPUs each, 4 GiB per CPU, 110 pods,
// tainted for kwok, labelled for the benchmark (and for the gangs' pool when pool is set).
func fakeNode(i, numa, cpus int, pool bool) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(numa*cpus), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(numa*cpus)<<32, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	labels := map[string]string{benchLabel: benchValue, "type": "kwok", corev1.LabelHostname: nodeName(i)}
	if pool {
		labels[poolLabel] = poolGangs
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName(i),
			Labels:      labels,
			Annotations: map[string]string{kwokKey: kwokValue, "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kwokKey, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
}

// toleration lets the benchmark's pods onto the fake nodes.
var toleration = corev1.Toleration{Key: kwokKey, Operator: corev1.TolerationOpEqual, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}

// nodeTopology is the NodeResourceTopology a node agent with nothing pinned, no reserved CPU and
// a one-CPU shared-pool minimum would publish for a fake node, owned by the node.
func nodeTopology(node string, uid types.UID, numa, cpus int) (*unstructured.Unstructured, error) {
	obj := &nrt.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node,
			Labels:          map[string]string{benchLabel: benchValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: uid}},
		},
		Attributes: []nrt.Attribute{
			{Name: nrt.AttrTopologyManagerPolicy, Value: nrt.PolicySingleNUMANode},
			{Name: nrt.AttrTopologyManagerScope, Value: nrt.ScopeContainer},
			{Name: nrt.AttrPodsFingerprint, Value: nrt.PodsFingerprint(nil)},
			{Name: nrt.AttrPodsFingerprintMethod, Value: nrt.MethodWithExclusiveResources},
			{Name: nrt.AttrGeneration, Value: "1"},
			{Name: nrt.AttrSharedCPUs, Value: cpuset.New(seq(0, numa*cpus)...).String()},
			{Name: nrt.AttrMinSharedCPUs, Value: "1"},
			{Name: nrt.AttrExclusiveAvailable, Value: strconv.Itoa(numa*cpus - 1)},
		},
	}
	for z := range numa {
		n := *resource.NewQuantity(int64(cpus), resource.DecimalSI)
		mem := *resource.NewQuantity(int64(cpus)<<32, resource.BinarySI)
		obj.Zones = append(obj.Zones, nrt.Zone{
			Name: nrt.ZoneName(z), Type: nrt.ZoneTypeNode,
			Attributes: []nrt.Attribute{
				{Name: nrt.AttrFreeCPUs, Value: cpuset.New(seq(z*cpus, (z+1)*cpus)...).String()},
				{Name: nrt.AttrPins, Value: ""},
			},
			Resources: []nrt.ResourceInfo{
				{Name: nrt.ResourceCPU, Capacity: n, Allocatable: n, Available: n},
				{Name: nrt.ResourceMemory, Capacity: mem, Allocatable: mem, Available: mem},
			},
		})
	}
	return nrt.ToUnstructured(obj)
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(n, workers int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// addNodes creates the fake nodes and their NodeResourceTopology objects, then waits until kwok
// reports every node Ready.
func addNodes(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, o *options) error {
	err := parallel(o.nodes, 32, func(i int) error {
		n, err := kube.CoreV1().Nodes().Create(ctx, fakeNode(i, o.numaPerNode, o.cpusNUMA, i < o.gangNodes && o.gangs > 0), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", nodeName(i), err)
		}
		u, err := nodeTopology(n.Name, n.UID, o.numaPerNode, o.cpusNUMA)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(nrt.GroupVersionResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create NodeResourceTopology %s: %w", n.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return poll(ctx, 5*time.Minute, "every fake node Ready", func() (bool, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchSelector})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == o.nodes, nil
	})
}

// removeAll deletes what the benchmark made — its namespace, fake nodes, their
// NodeResourceTopology objects and the Leases kwok renewed for them — and waits until the nodes
// and Leases are gone. A Lease left to the garbage collector would still be there when the next
// run makes a node of the same name, and kwok's renewals of it then fail for as long as the
// collector takes, keeping that node NotReady. It runs with its own context, so an interrupted
// run still cleans up.
func removeAll(kube kubernetes.Interface, dyn dynamic.Interface) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	if err := deleteSelected(ctx, kube, benchSelector, "the benchmark's pods"); err != nil {
		errs = append(errs, err)
	}
	if err := kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete namespace %s: %w", namespace, err))
	}
	if err := dyn.Resource(nrt.GroupVersionResource).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchSelector}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete the fake nodes' NodeResourceTopology objects: %w", err))
	}
	if err := kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchSelector}); err != nil {
		errs = append(errs, fmt.Errorf("delete the fake nodes: %w", err))
	}
	err := poll(ctx, 2*time.Minute, "the fake nodes gone", func() (bool, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchSelector})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		errs = append(errs, err)
	}
	if err := deleteLeases(ctx, kube); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean up: %v", errs)
	}
	return nil
}

// fakeLeases lists the node Leases owned by fake nodes, by name (a Lease of a deleted node
// still names it).
func fakeLeases(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	list, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the node Leases: %w", err)
	}
	var names []string
	for _, l := range list.Items {
		for _, o := range l.OwnerReferences {
			if o.Kind == "Node" && o.Name == l.Name && isFakeNode(l.Name) {
				names = append(names, l.Name)
				break
			}
		}
	}
	return names, nil
}

// deleteLeases deletes the fake nodes' Leases and waits until they are gone.
func deleteLeases(ctx context.Context, kube kubernetes.Interface) error {
	names, err := fakeLeases(ctx, kube)
	if err != nil {
		return err
	}
	err = parallel(len(names), 32, func(i int) error {
		err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, names[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Lease %s/%s: %w", corev1.NamespaceNodeLease, names[i], err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, "the fake nodes' Leases gone", func() (bool, error) {
		names, err := fakeLeases(ctx, kube)
		return len(names) == 0, err
	})
}

// poll calls done every 200 ms until it reports true, fails, or limit passes.
func poll(ctx context.Context, limit time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not reached within %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
