package classify

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// The labels of a Slurm job's placeholder pod, as the placer's Slurm bridge sets them
// (pkg/placer/slurmbridge; a test holds the two equal).
const (
	LabelWorkload    = "finegrain.dev/workload"
	WorkloadSlurmJob = "slurm-job"
	LabelSlurmJob    = "finegrain.dev/slurm-job"
	// SlurmdContainer and PlaceholderContainer are the containers of a virtual cluster's node
	// pod and of a placeholder whose cgroups the confinement of Slurm jobs reads and writes.
	SlurmdContainer      = v1alpha1.RoleSlurmd
	PlaceholderContainer = "placeholder"
)

// SlurmRole is what a pod is to the confinement of Slurm jobs' processes
// (docs/slurm.md): the slurmd of a virtual cluster, or the placeholder of one of its
// jobs. Labels alone name neither, since any pod author writes them: both must also carry an
// ownerReference to the VirtualCluster the label names, and the agent pairs a slurmd pod only
// with placeholders of the same namespace whose reference carries the same VirtualCluster UID.
type SlurmRole struct {
	// Cluster is the VirtualCluster's name, Owner its UID (from the ownerReference).
	Cluster string
	Owner   string
	// Slurmd is true for the node pod that runs the virtual cluster's slurmd (a controller
	// reference to the VirtualCluster); otherwise the pod is the placeholder of Job, bound by
	// the placer.
	Slurmd bool
	Job    slurm.JobID
}

// slurmRole reads a pod's part in a virtual cluster; nil when it has none the agent trusts.
func slurmRole(pod *corev1.Pod, cfg Config) *SlurmRole {
	cluster := pod.Labels[v1alpha1.LabelVirtualCluster]
	if cluster == "" {
		return nil
	}
	var owner *metav1.OwnerReference
	for i, r := range pod.OwnerReferences {
		if r.APIVersion == v1alpha1.GroupVersion.String() && r.Kind == v1alpha1.VirtualClusterKind && r.Name == cluster && r.UID != "" {
			owner = &pod.OwnerReferences[i]
			break
		}
	}
	if owner == nil {
		return nil
	}
	switch {
	case pod.Labels[v1alpha1.LabelRole] == v1alpha1.RoleSlurmd && owner.Controller != nil && *owner.Controller:
		return &SlurmRole{Cluster: cluster, Owner: string(owner.UID), Slurmd: true}
	case pod.Labels[LabelWorkload] == WorkloadSlurmJob && pod.Spec.SchedulerName == cfg.PlacerSchedulerName:
		id, err := slurm.ParseJobID(pod.Labels[LabelSlurmJob])
		if err != nil {
			return nil
		}
		return &SlurmRole{Cluster: cluster, Owner: string(owner.UID), Job: id}
	}
	return nil
}
