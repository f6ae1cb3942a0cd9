package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// API coordinates of the VirtualCluster resource.
const (
	VirtualClusterKind     = "VirtualCluster"
	VirtualClusterResource = "virtualclusters"
)

// VirtualClusterGroupVersionResource addresses VirtualClusters through the dynamic client.
var VirtualClusterGroupVersionResource = GroupVersion.WithResource(VirtualClusterResource)

// Labels every pod of a virtual cluster carries (docs/slurm.md).
const (
	// LabelVirtualCluster names the VirtualCluster a pod belongs to.
	LabelVirtualCluster = "finegrain.dev/virtual-cluster"
	// LabelRole (shared with HPCJob pods) is RoleSlurmctld or RoleSlurmd on them.
	RoleSlurmctld = layout.RoleSlurmctld
	RoleSlurmd    = layout.RoleSlurmd
)

// VirtualCluster is a private Slurm cluster in containers: one controller pod (slurmctld) and one
// node pod (slurmd, sshd, munged) on every node the cluster spans, with its own munge key,
// generated slurm.conf and ports (docs/slurm.md).
type VirtualCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualClusterSpec   `json:"spec"`
	Status VirtualClusterStatus `json:"status,omitempty"`
}

// VirtualClusterSpec is what the user declares.
type VirtualClusterSpec struct {
	// Image runs every pod of the virtual cluster (default DefaultSlurmImage); an image of the
	// user's must keep its entrypoint and Slurm packages (images/mpi/README.md).
	Image string `json:"image,omitempty"`
	// NodeSelector picks the nodes the virtual cluster spans by their labels; empty spans every
	// schedulable node.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Partitions are the Slurm partitions. Omitted, one partition DefaultPartitionName over
	// every node is the default.
	Partitions []SlurmPartition `json:"partitions,omitempty"`
	// SharedVolume, when set, is a file system every pod of the virtual cluster mounts at the
	// same path, which is also the pods' working directory: a batch job's output
	// (slurm-<id>.out, in the directory it was submitted from) written on its node is read where
	// it was submitted (docs/slurm.md, "Shared file system"). Omitted, each pod has only its own
	// files.
	SharedVolume *SharedVolume `json:"sharedVolume,omitempty"`
}

// SharedVolume is a PersistentVolumeClaim that every pod of a virtual cluster mounts read-write.
type SharedVolume struct {
	// ClaimName is the PersistentVolumeClaim, in the virtual cluster's namespace. Its volume is
	// mounted on every spanned node at once: the claim must have the access mode ReadWriteMany.
	ClaimName string `json:"claimName"`
	// MountPath is where every pod mounts it (default DefaultSharedMountPath): an absolute path
	// of letters, digits, '.', '_' and '-', neither a system directory of the image nor holding
	// or inside one of the pods' own mounts.
	MountPath string `json:"mountPath,omitempty"`
}

// SlurmPartition is one Slurm partition and the limits Slurm enforces in it.
type SlurmPartition struct {
	// Name is the partition's name in Slurm (letters, digits, '-' and '_').
	Name string `json:"name"`
	// Nodes are the Kubernetes names of the spanned nodes in the partition; empty means all.
	// A named node the virtual cluster does not span is left out.
	Nodes []string `json:"nodes,omitempty"`
	// Default makes it the partition of jobs that name none; at most one partition may say so
	// (none does: the first is the default).
	Default bool `json:"default,omitempty"`
	// MaxTime is the longest time limit a job may have (Slurm's MaxTime, whole minutes, rounded
	// up); omitted, unlimited.
	MaxTime *metav1.Duration `json:"maxTime,omitempty"`
	// DefaultTime is the time limit of a job that gives none (Slurm's DefaultTime); omitted,
	// MaxTime.
	DefaultTime *metav1.Duration `json:"defaultTime,omitempty"`
	// MaxNodes bounds the nodes of one job (0: unlimited).
	MaxNodes int32 `json:"maxNodes,omitempty"`
	// MaxCPUsPerNode bounds the CPUs the partition's jobs use on one node together (0:
	// unlimited).
	MaxCPUsPerNode int32 `json:"maxCPUsPerNode,omitempty"`
}

// Defaults and limits of a VirtualCluster.
const (
	// DefaultSlurmImage is the MPI image, which carries Slurm and munge.
	DefaultSlurmImage = "localhost/finegrain-mpi:dev"
	// DefaultPartitionName is the partition of a virtual cluster that declares none.
	DefaultPartitionName = "batch"
	// DefaultSharedMountPath is where a shared volume is mounted when spec.sharedVolume gives no
	// mountPath.
	DefaultSharedMountPath = "/home"
	// MaxPartitions bounds spec.partitions.
	MaxPartitions = 64
	// MaxVirtualClusterNameLength keeps the names of the objects made from a virtual cluster's
	// name (a node pod is <name>-slurmd-<node>) and its Slurm ClusterName short.
	MaxVirtualClusterNameLength = 40
)

// Condition types of a VirtualCluster.
const (
	// VirtualClusterReady is True when slurmctld answers and every spanned node's slurmd has
	// registered; its reason says what is missing otherwise.
	VirtualClusterReady = "Ready"
)

// VirtualClusterStatus is what the controller reports.
type VirtualClusterStatus struct {
	// ObservedGeneration is the spec generation the status speaks of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Ports are the ports the virtual cluster's daemons listen on, on their nodes' network;
	// assigned once and kept.
	Ports *VirtualClusterPorts `json:"ports,omitempty"`
	// ControllerNode is the node of the slurmctld pod.
	ControllerNode string `json:"controllerNode,omitempty"`
	// ConfigHash identifies the configuration the pods run with: the generated slurm.conf,
	// cgroup.conf and ssh configuration, and the shared volume.
	ConfigHash string `json:"configHash,omitempty"`
	// Nodes are the spanned nodes with their node pods and Slurm states, by name.
	Nodes []VirtualClusterNode `json:"nodes,omitempty"`
	// Jobs are the Slurm jobs slurmctld knows (squeue), at most MaxStatusJobs.
	Jobs       []SlurmJob         `json:"jobs,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MaxStatusJobs bounds status.jobs; the rest are left out.
const MaxStatusJobs = 100

// VirtualClusterPorts are a virtual cluster's ports, each free on every node it spans.
type VirtualClusterPorts struct {
	Slurmctld int32 `json:"slurmctld"`
	Slurmd    int32 `json:"slurmd"`
	SSH       int32 `json:"ssh"`
	// SrunFirst and SrunLast bound the ports srun listens on for its steps (SrunPortRange).
	SrunFirst int32 `json:"srunFirst"`
	SrunLast  int32 `json:"srunLast"`
}

// VirtualClusterNode is one spanned node.
type VirtualClusterNode struct {
	// Name is the node's name, in Kubernetes and in Slurm.
	Name string `json:"name"`
	// Pod is the node pod's name and PodReady whether it is ready.
	Pod      string `json:"pod,omitempty"`
	PodReady bool   `json:"podReady,omitempty"`
	// SlurmState is the node's state in Slurm (sinfo), such as IDLE, ALLOCATED or DOWN; empty
	// until slurmctld answers.
	SlurmState string `json:"slurmState,omitempty"`
}

// SlurmJob is one job as squeue shows it.
type SlurmJob struct {
	ID        int64  `json:"id"`
	Name      string `json:"name,omitempty"`
	State     string `json:"state"`
	Partition string `json:"partition,omitempty"`
	Nodes     string `json:"nodes,omitempty"`
	Reason    string `json:"reason,omitempty"`
}
