// Package snapshottest builds the API objects placer tests and benchmarks start from: nodes,
// NodeResourceTopology objects of the shape docs/interfaces.md defines, and pods. It is for
// tests only and must not be imported by production code.
package snapshottest

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Node is a Ready node with cpus whole CPUs, memory bytes and room for 110 pods.
func Node(name string, cpus int, memory string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// Zone is one NUMA node of a NodeResourceTopology.
type Zone struct {
	// Free is the free-cpus list; Available defaults to its size when negative.
	Free      string
	Available int
	// Memory is the zone's allocatable and available memory ("" leaves memory out).
	Memory string
	// Pins is the finegrain.dev/pins attribute ("" leaves it out).
	Pins string
}

// NRT is the NodeResourceTopology of node, zone i being NUMA node i, as an agent keeping a
// shared pool of at least one CPU publishes it: every zone's allocatable CPUs are its free ones,
// and exclusive requests can take all free CPUs but one on the node together (less when a zone's
// Available says the shared pool's minimum limits it).
func NRT(node string, generation int, zones ...Zone) *unstructured.Unstructured {
	var zs []any
	free := 0
	exclusive := -1
	for i, z := range zones {
		set, err := cpulist.Parse(z.Free)
		size := set.Size()
		if err != nil {
			size = 0
		}
		free += size
		avail := z.Available
		if avail < 0 {
			avail = size
		} else if avail < size && (exclusive < 0 || avail < exclusive) {
			exclusive = avail
		}
		res := []any{map[string]any{
			"name": nrt.ResourceCPU, "capacity": strconv.Itoa(size), "allocatable": strconv.Itoa(size), "available": strconv.Itoa(avail),
		}}
		if z.Memory != "" {
			res = append(res, map[string]any{"name": nrt.ResourceMemory, "capacity": z.Memory, "allocatable": z.Memory, "available": z.Memory})
		}
		attrs := []any{map[string]any{"name": nrt.AttrFreeCPUs, "value": z.Free}}
		if z.Pins != "" {
			attrs = append(attrs, map[string]any{"name": nrt.AttrPins, "value": z.Pins})
		}
		zs = append(zs, map[string]any{
			"name": nrt.ZoneName(i), "type": nrt.ZoneTypeNode, "resources": res, "attributes": attrs,
		})
	}
	if spare := max(free-1, 0); exclusive < 0 || spare < exclusive {
		exclusive = spare
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nrt.Group + "/" + nrt.Version,
		"kind":       nrt.Kind,
		"metadata":   map[string]any{"name": node},
		"attributes": []any{
			map[string]any{"name": nrt.AttrTopologyManagerPolicy, "value": nrt.PolicySingleNUMANode},
			map[string]any{"name": nrt.AttrPodsFingerprint, "value": nrt.PodsFingerprint(nil)},
			map[string]any{"name": nrt.AttrGeneration, "value": strconv.Itoa(generation)},
			map[string]any{"name": nrt.AttrMinSharedCPUs, "value": "1"},
			map[string]any{"name": nrt.AttrExclusiveAvailable, "value": strconv.Itoa(exclusive)},
		},
		"zones": zs,
	}}
}

// Pod is a running pod on node ("" for pending) with one container requesting cpu and memory
// (both also its limits); pinned adds the exclusive pinning label.
func Pod(namespace, name, node, cpu, memory string, pinned bool) *corev1.Pod {
	res := corev1.ResourceList{}
	if cpu != "" {
		res[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		res[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if node == "" {
		p.Status.Phase = corev1.PodPending
	}
	if pinned {
		p.Labels[v1alpha1.LabelPinning] = v1alpha1.PinningExclusive
	}
	return p
}

// Uniform is a cluster of n nodes named prefix-0000… each with zones NUMA nodes of cpusPerZone
// CPUs (all free) and memPerZoneGi GiB of memory per NUMA node.
func Uniform(prefix string, n, zones, cpusPerZone, memPerZoneGi int) snapshot.Input {
	var in snapshot.Input
	for i := range n {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		in.Nodes = append(in.Nodes, Node(name, zones*cpusPerZone, fmt.Sprintf("%dGi", zones*memPerZoneGi), nil))
		var zs []Zone
		for z := range zones {
			zs = append(zs, Zone{Free: fmt.Sprintf("%d-%d", z*cpusPerZone, (z+1)*cpusPerZone-1), Available: -1, Memory: fmt.Sprintf("%dGi", memPerZoneGi)})
		}
		in.Topologies = append(in.Topologies, NRT(name, 1, zs...))
	}
	return in
}
