package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// MemberFromPod makes a gang member of a pod: what it requests from a node and from one NUMA
// node, its constraints (pass the same pointer for pods with identical constraints), and the
// node it is bound to, if any.
func MemberFromPod(pod *corev1.Pod, group int, c *Constraints) Member {
	cpus, mem := snapshot.PinnedDemand(pod)
	return Member{
		Name:         pod.Name,
		Group:        group,
		Request:      snapshot.PodRequests(pod),
		PinnedCPUs:   cpus,
		PinnedMemory: mem,
		HostPorts:    snapshot.HostPortsOf(pod),
		Constraints:  c,
		BoundNode:    pod.Spec.NodeName,
	}
}

// IncompleteError says a pod group has fewer pods than its min-available: the gang waits for
// its pods to be created rather than failing.
type IncompleteError struct {
	Group      string
	Have, Want int
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("%s has %d pods, fewer than its min-available %d: waiting for the rest to be created", e.Group, e.Have, e.Want)
}

// PodGang makes the gang of plain pods labelled pod-group.scheduling.x-k8s.io/name=name (the
// deprecated label) in one namespace. Every pod must carry the same positive min-available label
// (default: all pods). Terminated pods are left out; bound pods count toward min-available and
// stay where they are. All members form one task group, so the gang packs onto as few nodes as it
// fits; a pod annotated finegrain.dev/exclusive-nodes=true makes the gang keep other HPC jobs off
// its nodes.
func PodGang(namespace, name string, pods []*corev1.Pod) (*Gang, error) {
	key := snapshot.PodGroupKey(namespace, name)
	live := liveByName(pods)
	minSet, minFrom := -1, ""
	for _, p := range live {
		if v, ok := p.Labels[v1alpha1.LabelPodGroupMinAvailable]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s: pod %s has label %s=%q, want a positive integer",
					key, p.Name, v1alpha1.LabelPodGroupMinAvailable, v)
			}
			if minSet >= 0 && n != minSet {
				return nil, fmt.Errorf("%s: pods %s and %s disagree on %s (%d and %d); give every pod the same value",
					key, minFrom, p.Name, v1alpha1.LabelPodGroupMinAvailable, minSet, n)
			}
			minSet, minFrom = n, p.Name
		}
	}
	if minSet < 0 {
		minSet = len(live)
	}
	return podGang(key, live, minSet)
}

// PodGroupGang makes the gang of the pods labelled scheduling.x-k8s.io/pod-group with the
// group's name: as PodGang, but of the group's spec.minMember (the pods' min-available labels
// are not read). The group must be valid (schedv1alpha1.FromUnstructured).
func PodGroupGang(pg *schedv1alpha1.PodGroup, pods []*corev1.Pod) (*Gang, error) {
	return podGang(snapshot.PodGroupKey(pg.Namespace, pg.Name), liveByName(pods), int(pg.Spec.MinMember))
}

// liveByName returns the pods that have not terminated, sorted by name.
func liveByName(pods []*corev1.Pod) []*corev1.Pod {
	var live []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return live
}

// podGang makes the one-task-group gang key of the live pods, of which minAvailable must fit:
// exclusive-nodes when any pod says so, most-loaded when any pod's placement annotation says so.
func podGang(key string, live []*corev1.Pod, minAvailable int) (*Gang, error) {
	if minAvailable > len(live) {
		return nil, &IncompleteError{Group: key, Have: len(live), Want: minAvailable}
	}
	g := &Gang{Key: key, Groups: 1, Policy: LeastLoaded, MinAvailable: minAvailable}
	var classes []*Constraints
	for _, p := range live {
		if p.Annotations[v1alpha1.AnnotationExclusiveNodes] == "true" {
			g.ExclusiveNodes = true
		}
		if v1alpha1.PlacementPolicy(p.Annotations[v1alpha1.AnnotationPlacement]) == v1alpha1.MostLoaded {
			g.Policy = MostLoaded
		}
		g.Members = append(g.Members, MemberFromPod(p, 0, sharedConstraints(&classes, ConstraintsOf(&p.Spec))))
	}
	return g, nil
}

// sharedConstraints returns an existing pointer equal to c, or records c.
func sharedConstraints(seen *[]*Constraints, c *Constraints) *Constraints {
	for _, s := range *seen {
		if equality.Semantic.DeepEqual(s, c) {
			return s
		}
	}
	*seen = append(*seen, c)
	return c
}

// PodKey is the gang key of a plain pod placed on its own (no pod-group label).
func PodKey(namespace, name string) string { return "pod " + namespace + "/" + name }

// SinglePod makes the one-member gang of a plain pod without a pod-group label: most-loaded when
// its placement annotation says so (a ServiceObjective's new replicas, from their template),
// least-loaded otherwise.
func SinglePod(pod *corev1.Pod) *Gang {
	g := &Gang{
		Key:            PodKey(pod.Namespace, pod.Name),
		Members:        []Member{MemberFromPod(pod, 0, ConstraintsOf(&pod.Spec))},
		Groups:         1,
		Policy:         LeastLoaded,
		MinAvailable:   1,
		ExclusiveNodes: pod.Annotations[v1alpha1.AnnotationExclusiveNodes] == "true",
	}
	if v1alpha1.PlacementPolicy(pod.Annotations[v1alpha1.AnnotationPlacement]) == v1alpha1.MostLoaded {
		g.Policy = MostLoaded
	}
	return g
}
