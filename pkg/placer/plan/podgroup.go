package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// UsesPodGroup reports whether a pod group's pods name it with scheduling.x-k8s.io/pod-group (any
// of them): its size, timeout and minimum resources then come from the PodGroup of that name
// (PodGroupGang), not from the deprecated labels (PodGang).
func UsesPodGroup(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if _, deprecated, ok := schedv1alpha1.GroupOf(p); ok && !deprecated {
			return true
		}
	}
	return false
}

// MinResourcesFit says why the cluster cannot hold a PodGroup's minResources, nil when it can:
// the free resources of the schedulable nodes (allocatable less requested), the requests of the
// group's bound pods counted as free.
func MinResourcesFit(snap *snapshot.Snapshot, pg *schedv1alpha1.PodGroup, live []*corev1.Pod) error {
	if len(pg.Spec.MinResources) == 0 {
		return nil
	}
	var free, alloc, used snapshot.Resources
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if cordoned(n) {
			continue
		}
		alloc.Add(&n.Allocatable)
		used.Add(&n.Requested)
	}
	for _, p := range live {
		if p.Spec.NodeName != "" {
			r := snapshot.PodRequests(p)
			free.Add(&r)
		}
	}
	free.Add(&alloc)
	var short []string
	for _, name := range slices.Sorted(maps.Keys(pg.Spec.MinResources)) {
		q := pg.Spec.MinResources[name]
		have := amount(&free, name) - amount(&used, name)
		want := q.Value()
		if name == corev1.ResourceCPU {
			want = q.MilliValue()
		}
		if have < want {
			short = append(short, fmt.Sprintf("%s %s (free %s)", name, q.String(), show(name, have)))
		}
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("PodGroup %s/%s: the cluster has less free than its minResources: %s; the group waits until that much is free",
		pg.Namespace, pg.Name, strings.Join(short, ", "))
}

func cordoned(n *snapshot.Node) bool {
	for _, t := range n.Taints {
		if t.Key == corev1.TaintNodeUnschedulable {
			return true
		}
	}
	return false
}

// amount is r's amount of one resource, CPU in millicores.
func amount(r *snapshot.Resources, name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case corev1.ResourcePods:
		return r.Pods
	}
	return r.Scalar(name)
}

// show prints an amount as amount returns it.
func show(name corev1.ResourceName, v int64) string {
	if name == corev1.ResourceCPU {
		return fmt.Sprintf("%dm", v)
	}
	return fmt.Sprint(v)
}
