package slurmbridge

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// Labels of a placeholder pod and its PodGroup (docs/slurm.md).
const (
	// LabelWorkload with WorkloadSlurmJob marks the placeholders of Slurm jobs (the Genisys
	// thesis's SLURM-JOB pods).
	LabelWorkload    = "finegrain.dev/workload"
	WorkloadSlurmJob = "slurm-job"
	// LabelVirtualCluster names the virtual cluster whose Slurm runs the job (the label the
	// virtual cluster's own pods carry).
	LabelVirtualCluster = v1alpha1.LabelVirtualCluster
	// LabelSlurmJob is the Slurm job ID.
	LabelSlurmJob = "finegrain.dev/slurm-job"
)

// ContainerName is the placeholder pod's one container, the one the node agent pins.
const ContainerName = "placeholder"

// virtualClusterKind is what a placeholder's ownerReference names.
var virtualClusterKind = v1alpha1.GroupVersion.WithKind(v1alpha1.VirtualClusterKind)

// Allocation is what one Slurm job gets from Kubernetes: a PodGroup of Pods pods of CPUs CPUs
// and Memory bytes each, one a node of the job, bound all together by the placer.
type Allocation struct {
	// Group names the PodGroup; the pods are Group-<i>.
	Group  string
	Pods   int
	CPUs   int
	Memory int64
}

// allocationOf sizes the placeholders of a job of a virtual cluster: one pod for each of its
// nodes, holding its CPUs on that node and their memory (the job's, else defaultMemoryPerCPU a
// CPU).
func allocationOf(cluster string, j slurm.Job, defaultMemoryPerCPU int64) Allocation {
	cpus := j.CPUsPerNode()
	mem := j.MemoryOnNode(cpus)
	if mem == 0 {
		mem = defaultMemoryPerCPU * int64(cpus)
	}
	return Allocation{Group: groupName(cluster, j.ID), Pods: max(j.Nodes, 1), CPUs: cpus, Memory: mem}
}

// groupName is the PodGroup of a job: "<cluster>-slurm-<id>", at most 40+7+10 characters.
func groupName(cluster string, id slurm.JobID) string { return cluster + "-slurm-" + id.String() }

// placeholderSpec is what the placeholders of one job look like beyond their size.
type placeholderSpec struct {
	namespace, cluster string
	// owner is the VirtualCluster's UID ("" leaves the objects without an owner).
	owner         types.UID
	job           slurm.JobID
	image         string
	schedulerName string
	// nodes are the Kubernetes nodes where the virtual cluster runs slurmd.
	nodes []string
	// exclusive keeps other jobs off the job's nodes; placement is the placer's tie-break.
	exclusive bool
	placement v1alpha1.PlacementPolicy
	// hostPort, when not 0, keeps two of the job's pods off one node (each asks for it).
	hostPort int32
}

func (s *placeholderSpec) labels(a Allocation) map[string]string {
	return map[string]string{
		LabelWorkload: WorkloadSlurmJob, LabelVirtualCluster: s.cluster, LabelSlurmJob: s.job.String(),
		schedv1alpha1.LabelPodGroup: a.Group, v1alpha1.LabelPinning: v1alpha1.PinningExclusive,
	}
}

func (s *placeholderSpec) owners() []metav1.OwnerReference {
	if s.owner == "" {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: virtualClusterKind.GroupVersion().String(), Kind: virtualClusterKind.Kind,
		Name: s.cluster, UID: s.owner}}
}

// podGroup is the job's PodGroup: all of its pods, or none.
func (s *placeholderSpec) podGroup(a Allocation) (*unstructured.Unstructured, error) {
	labels := s.labels(a)
	delete(labels, schedv1alpha1.LabelPodGroup)
	delete(labels, v1alpha1.LabelPinning)
	pg := &schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.GroupName + "/" + schedv1alpha1.Version, Kind: schedv1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: a.Group, Namespace: s.namespace, Labels: labels, OwnerReferences: s.owners()},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(a.Pods)},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
	if err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", s.namespace, a.Group, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// pods are the job's placeholder pods: Guaranteed (requests = limits, whole CPUs), so that the
// node agent pins each to exclusive cores of one NUMA node; bound by the placer; only on the
// nodes where the virtual cluster has slurmd; a sleeping container that stops at once. They use
// their node's network, as the virtual cluster's own pods do: a placeholder holds CPUs and
// memory, never traffic (the job's processes run in the slurmd pod's network), so it needs no
// pod address, and a node whose pod network is absent or out of addresses (the local one-node
// cluster has none) would otherwise never start it, and the job would wait forever.
func (s *placeholderSpec) pods(a Allocation) []*corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(a.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(a.Memory, resource.BinarySI),
	}
	annotations := map[string]string{}
	if s.exclusive {
		annotations[v1alpha1.AnnotationExclusiveNodes] = "true"
	}
	if s.placement != "" {
		annotations[v1alpha1.AnnotationPlacement] = string(s.placement)
	}
	// One term for each node (terms are ORed): the API server takes a single value for a
	// metadata.name field requirement.
	var terms []corev1.NodeSelectorTerm
	for _, n := range slices.Sorted(slices.Values(s.nodes)) {
		terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}}})
	}
	var ports []corev1.ContainerPort
	if s.hostPort != 0 {
		ports = []corev1.ContainerPort{{Name: "one-per-node", ContainerPort: s.hostPort, HostPort: s.hostPort, Protocol: corev1.ProtocolTCP}}
	}
	grace := int64(0)
	no := false
	pods := make([]*corev1.Pod, a.Pods)
	for i := range pods {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.Group + "-" + strconv.Itoa(i), Namespace: s.namespace, Labels: s.labels(a),
				Annotations: annotations, OwnerReferences: s.owners()},
			Spec: corev1.PodSpec{
				SchedulerName:                 s.schedulerName,
				HostNetwork:                   true,
				TerminationGracePeriodSeconds: &grace,
				AutomountServiceAccountToken:  &no,
				EnableServiceLinks:            &no,
				RestartPolicy:                 corev1.RestartPolicyAlways,
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
				}},
				Containers: []corev1.Container{{
					Name: ContainerName, Image: s.image, ImagePullPolicy: corev1.PullIfNotPresent, Ports: ports,
					Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				}},
			},
		}
	}
	return pods
}
