package snapshot

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
)

// Input is the API objects a snapshot is built from.
type Input struct {
	Nodes []*corev1.Node
	// Topologies are NodeResourceTopology objects, one per node, named after it.
	Topologies []*unstructured.Unstructured
	// Pods are all pods; pending and terminated ones are skipped. What they claim to be (an HPC
	// job's worker, its fence, a NUMA node) counts only where SchedulerName or Jobs vouch for it
	// (trust.go).
	Pods []*corev1.Pod
	// PodGroups are PodGroup objects (scheduling.x-k8s.io), for planning a pod group offline.
	PodGroups []*unstructured.Unstructured
	// Own are pods the placer placed itself and assumes (not in Pods), taken as they claim.
	Own []*corev1.Pod
	// SchedulerName is the placer's; Jobs its HPCJobs by "namespace/name".
	SchedulerName string
	Jobs          map[string]JobRecord
	// Gone names pods ("namespace/name") to treat as deleted: their requests are not counted
	// and the cores the free-core map lists them pinned to are free again. It answers "what if
	// these pods were gone" (shrinking an elastic job).
	Gone map[string]bool
}

// HPCJobKey is the JobOnNode key of an HPCJob.
func HPCJobKey(namespace, name string) string { return "HPCJob " + namespace + "/" + name }

// PodGroupKey is the JobOnNode key of a gang of plain pods.
func PodGroupKey(namespace, name string) string { return "pod group " + namespace + "/" + name }

// JobOf returns the HPC job a pod claims to be a worker of, if any (the snapshot believes it only
// of pods the placer vouches for: trust.go).
func JobOf(pod *corev1.Pod) (JobOnNode, bool) {
	exclusive := pod.Annotations[v1alpha1.AnnotationExclusiveNodes] == "true"
	if job := pod.Labels[v1alpha1.LabelJob]; job != "" && pod.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker {
		return JobOnNode{Key: HPCJobKey(pod.Namespace, job), Exclusive: exclusive}, true
	}
	if group, _, ok := schedv1alpha1.GroupOf(pod); ok {
		return JobOnNode{Key: PodGroupKey(pod.Namespace, group), Exclusive: exclusive}, true
	}
	return JobOnNode{}, false
}

// Build makes a snapshot from a list of objects in one go — the full rebuild a Cache spares the
// placer, kept as the oracle its tests compare against. The objects are taken to have distinct
// names, as an informer holds them (of two nodes or maps of one name the later wins; two pods of
// one name both count). It never fails: an object it cannot read is reported in Warnings (and a
// node with an unreadable free-core map gets a TopologyProblem).
func Build(in Input) *Snapshot {
	states := gatherStates(in)
	s := &Snapshot{}
	for _, st := range states {
		if st.node == nil {
			if st.hasMap {
				s.orphans = append(s.orphans, st.name)
			}
			continue
		}
		s.Nodes = append(s.Nodes, st.derive(in.Gone))
	}
	return s
}

// gatherStates sorts the objects by the node they concern, in name order: the Node object, the
// NodeResourceTopology and the pods that count on it.
func gatherStates(in Input) []*nodeState {
	byName := make(map[string]*nodeState, len(in.Nodes))
	state := func(name string) *nodeState {
		st, ok := byName[name]
		if !ok {
			st = &nodeState{name: name}
			byName[name] = st
		}
		return st
	}
	for _, n := range in.Nodes {
		state(n.Name).setNode(n)
	}
	for _, u := range in.Topologies {
		state(u.GetName()).setMap(u)
	}
	t := &trust{schedulerName: in.SchedulerName, jobs: in.Jobs}
	for _, p := range in.Pods {
		if node := countedOn(p); node != "" {
			st := state(node)
			st.pods = append(st.pods, newPodInfo(p, "", t))
		}
	}
	for _, p := range in.Own {
		if node := countedOn(p); node != "" {
			st := state(node)
			st.pods = append(st.pods, newPodInfo(p, "", nil))
		}
	}
	states := make([]*nodeState, 0, len(byName))
	for _, st := range byName {
		states = append(states, st)
	}
	slices.SortFunc(states, func(a, b *nodeState) int { return cmp.Compare(a.name, b.name) })
	return states
}
