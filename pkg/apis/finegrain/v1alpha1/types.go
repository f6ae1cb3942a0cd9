// Package v1alpha1 defines the finegrain.dev/v1alpha1 API served by the HPCJob custom resource:
// the job spec a user writes, the status the placer reports, their defaults and their validation.
// The types are plain Go structs with JSON tags; the placer reads and writes them through the
// dynamic client and converts from unstructured objects, so no generated code (deep copies,
// clientsets) exists or is needed. This package must not talk to the API server or decide
// placements.
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// API coordinates of the HPCJob resource.
const (
	GroupName = "finegrain.dev"
	Version   = "v1alpha1"
	Kind      = "HPCJob"
	Resource  = "hpcjobs"
)

// GroupVersion is finegrain.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource addresses HPCJobs through the dynamic client.
var GroupVersionResource = GroupVersion.WithResource(Resource)

// Profile is what limits a job's performance; it steers granularity selection.
type Profile string

// Profiles, as in the fine-grained scheduling paper.
const (
	// ProfileCPU jobs are compute bound: spreading them over nodes costs little.
	ProfileCPU Profile = "cpu"
	// ProfileMemory jobs are memory-bandwidth bound: spreading them gains bandwidth.
	ProfileMemory Profile = "memory"
	// ProfileNetwork jobs are communication bound: they stay on as few nodes as possible.
	ProfileNetwork Profile = "network"
)

// Granularity is the policy that turns MPI tasks into worker pods (paper Algorithm 1).
type Granularity string

// Granularity policies.
const (
	// GranularityScale runs one worker per node on as many nodes as there are tasks or nodes.
	GranularityScale Granularity = "scale"
	// GranularityFine runs one worker per task, grouped into one task group per node.
	GranularityFine Granularity = "granularity"
	// GranularityNone runs the user's Workers count, packed as one task group.
	GranularityNone Granularity = "none"
)

// PlacementPolicy breaks ties between equally scored nodes (Genisys's policies).
type PlacementPolicy string

// Placement policies.
const (
	// LeastLoaded prefers the node with the smallest fraction of its CPU requested (spread).
	LeastLoaded PlacementPolicy = "least-loaded"
	// MostLoaded prefers the node with the largest fraction of its CPU requested (bin packing).
	MostLoaded PlacementPolicy = "most-loaded"
)

// HPCJob is one MPI job: Tasks processes, turned by the placer into pinned worker pods, a
// launcher pod, a hostfile ConfigMap and a headless Service, and bound gang-wise.
type HPCJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HPCJobSpec   `json:"spec"`
	Status HPCJobStatus `json:"status,omitempty"`
}

// HPCJobSpec is what the user asks for.
type HPCJobSpec struct {
	// Tasks is Nt, the number of MPI processes.
	Tasks int32 `json:"tasks"`
	// Profile defaults to cpu.
	Profile Profile `json:"profile,omitempty"`
	// Granularity defaults to scale.
	Granularity Granularity `json:"granularity,omitempty"`
	// Workers is the user's worker count, required with granularity none.
	Workers int32 `json:"workers,omitempty"`
	// SlotsPerWorker, when set, is how many MPI tasks every worker runs (its slots in the
	// hostfile; its CPUs are this many times taskResources.cpu), as MPI Operator's field of the
	// name: the job then has tasks/slotsPerWorker workers, and granularity selection only chooses
	// their nodes and task groups. Unset, granularity decides the tasks per worker.
	SlotsPerWorker int32 `json:"slotsPerWorker,omitempty"`
	// RunLauncherAsWorker makes the launcher run slotsPerWorker of the tasks too, as MPI
	// Operator's field of the name: it comes first in the hostfile (ranks 0 to slotsPerWorker-1,
	// under its own host name), is pinned like a worker (exclusive cores of one NUMA node, CPU and
	// memory of slotsPerWorker tasks) and the job has one worker fewer. Needs slotsPerWorker.
	RunLauncherAsWorker bool `json:"runLauncherAsWorker,omitempty"`
	// TaskResources is what one MPI task needs; a worker asks for it times its task count.
	TaskResources TaskResources `json:"taskResources"`
	// PriorityClassName names the PriorityClass whose value is the job's priority, as for a pod;
	// empty takes the cluster's default class (globalDefault), or 0 without one. The job's pods
	// carry it, so the API server's Priority admission and PriorityClass-scoped ResourceQuotas
	// decide who may use it. The priority orders the placer's queue (higher first) and decides
	// which elastic jobs may be shrunk for the job (pkg/placer/priority).
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Priority, when set, lowers the job's priority below its class's value; it never raises it
	// (a user may only yield).
	Priority *int32 `json:"priority,omitempty"`
	// Placement defaults to least-loaded.
	Placement PlacementPolicy `json:"placement,omitempty"`
	// ExclusiveNodes keeps every other HPC job's workers off the nodes this job's workers use.
	ExclusiveNodes bool `json:"exclusiveNodes,omitempty"`
	// Gang controls all-or-nothing placement.
	Gang GangPolicy `json:"gang,omitempty"`
	// Elastic, when set, lets the placer start, shrink and expand the job between a minimum and
	// a maximum number of workers.
	Elastic *Elastic `json:"elastic,omitempty"`
	// MPIImplementation decides the hostfile format and the launcher environment that make a
	// bare mpirun use the hostfile and SSH; defaults to OpenMPI.
	MPIImplementation MPIImplementation `json:"mpiImplementation,omitempty"`
	// SSHAuthMountPath is where the job's SSH identity, authorized_keys and client config are
	// mounted (read-only) in the launcher and every worker; defaults to /root/.ssh.
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty"`
	// LauncherCreationPolicy says when the launcher pod is created; defaults to
	// WaitForWorkersReady.
	LauncherCreationPolicy LauncherCreationPolicy `json:"launcherCreationPolicy,omitempty"`
	// RunPolicy bounds the job's run and says what happens to its pods when it ends.
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
	// Launcher is the template of the pod that runs mpirun; it runs in the shared pool.
	Launcher corev1.PodTemplateSpec `json:"launcher"`
	// Worker is the template of every worker pod; the placer sets the first container's CPU and
	// memory requests and limits from TaskResources, its SSH port, readiness probe and mounts.
	Worker corev1.PodTemplateSpec `json:"worker"`
}

// TaskResources is the per-task request.
type TaskResources struct {
	// CPU per task, a whole number of CPUs (workers get exclusive cores).
	CPU resource.Quantity `json:"cpu"`
	// Memory per task; DefaultTaskMemoryBytes (1Gi) when omitted or 0. A worker's memory request
	// and limit are both this times its tasks, so workers are Guaranteed.
	Memory resource.Quantity `json:"memory,omitempty"`
}

// GangPolicy is the gang part of the spec.
type GangPolicy struct {
	// MinAvailable is how many workers must fit together before any is bound; defaults to all.
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// TimeoutSeconds is how long the job may wait for its gang to fit before it is marked
	// unschedulable and the queue moves on; defaults to 300.
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// Elastic bounds an elastic job. Each worker runs Tasks/MaxReplicas tasks; the job runs with
// between MinReplicas and MaxReplicas workers. Without a RescaleHook the job is moldable: the
// placer chooses its size when it starts and never changes it (MinReplicas = MaxReplicas makes
// it rigid); with one, the placer may shrink it for a job of higher priority and grow
// it when room appears, telling the application through the hook each time.
type Elastic struct {
	MinReplicas int32 `json:"minReplicas"`
	MaxReplicas int32 `json:"maxReplicas"`
	// RescaleGapSeconds is the least time between two rescales of the job (default 60).
	RescaleGapSeconds int32 `json:"rescaleGapSeconds,omitempty"`
	// RescaleHook is how the running application is told of a new size.
	RescaleHook *RescaleHook `json:"rescaleHook,omitempty"`
}

// RescaleHook is how the placer tells a running job's launcher of a new worker count and waits
// for its acknowledgement: exactly one of HTTP and Exec. The request (RescaleRequest) is JSON: the
// body of an HTTP POST, or the standard input of the command. To shrink, the placer publishes the
// new hostfile, calls the hook, and deletes the workers that go once the hook acknowledged; to
// grow, it binds the new workers, waits for them to be Ready, publishes the new hostfile, then
// calls the hook. A hook that fails or does not answer within TimeoutSeconds leaves the job at
// its size (the new workers of a growth are deleted again) with a Rescaling condition saying why.
type RescaleHook struct {
	// HTTP is an endpoint the launcher serves.
	HTTP *HTTPRescaleHook `json:"http,omitempty"`
	// Exec is a command the placer runs in the launcher's first container.
	Exec *ExecRescaleHook `json:"exec,omitempty"`
	// TimeoutSeconds bounds the wait for the acknowledgement, and for the new workers of a
	// growth to be Ready (default 60).
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// HTTPRescaleHook: the placer POSTs the request to http://<launcher pod IP>:<port><path>; an
// answer of status 2xx acknowledges.
type HTTPRescaleHook struct {
	Port int32 `json:"port"`
	// Path defaults to /rescale.
	Path string `json:"path,omitempty"`
}

// ExecRescaleHook: the placer runs Command (no shell unless it names one) in the launcher's first
// container with the request on its standard input; exit status 0 acknowledges.
type ExecRescaleHook struct {
	Command []string `json:"command"`
}

// Rescale directions, as RescaleRequest.Direction names them.
const (
	RescaleShrink = "shrink"
	RescaleExpand = "expand"
)

// RescaleRequest is what a rescale hook receives, as JSON (docs/placer.md).
type RescaleRequest struct {
	// Job is "namespace/name".
	Job string `json:"job"`
	// Direction is RescaleShrink or RescaleExpand.
	Direction string `json:"direction"`
	// FromWorkers and ToWorkers are the worker counts before and after.
	FromWorkers int32 `json:"fromWorkers"`
	ToWorkers   int32 `json:"toWorkers"`
	// Workers are the host names of the workers after the rescale, in rank order.
	Workers []string `json:"workers"`
	// Hostfile is the new hostfile, as published in the job's ConfigMap (the copy mounted in the
	// launcher follows within the kubelet's sync period).
	Hostfile string `json:"hostfile"`
}

// MPIImplementation is the MPI library the job's launcher and workers run.
type MPIImplementation string

// MPI implementations.
const (
	// OpenMPI: hostfile lines "host slots=N", mpirun configured through OMPI_MCA_* variables.
	OpenMPI MPIImplementation = "OpenMPI"
	// MPICH: hostfile lines "host:N", Hydra's mpiexec configured through HYDRA_* variables.
	MPICH MPIImplementation = "MPICH"
)

// LauncherCreationPolicy says when the launcher pod is created.
type LauncherCreationPolicy string

// Launcher creation policies, as MPI Operator names them.
const (
	// WaitForWorkersReady creates the launcher once every worker is Ready (its sshd accepts
	// connections), so mpirun never dials a worker that is still starting.
	WaitForWorkersReady LauncherCreationPolicy = "WaitForWorkersReady"
	// AtStartup creates the launcher together with the workers.
	AtStartup LauncherCreationPolicy = "AtStartup"
)

// CleanPodPolicy says which pods are deleted when a job ends.
type CleanPodPolicy string

// Clean pod policies, with MPI Operator's meanings.
const (
	// CleanPodPolicyRunning deletes the pods still running (the workers, and a launcher still
	// running when the job failed); an ended launcher stays for its logs.
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	// CleanPodPolicyAll deletes every pod of the job, the launcher included.
	CleanPodPolicyAll CleanPodPolicy = "All"
	// CleanPodPolicyNone deletes nothing: running workers keep their pinned CPUs until the job
	// is deleted.
	CleanPodPolicyNone CleanPodPolicy = "None"
)

// RunPolicy bounds a job's run.
type RunPolicy struct {
	// CleanPodPolicy defaults to Running.
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
	// TTLSecondsAfterFinished, when set, deletes the job (and with it its pods, Secret,
	// ConfigMap and Service) that long after it ended.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// ActiveDeadlineSeconds, when set, fails a job still running that long after its workers
	// were bound.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// BackoffLimit is how many times a failed run is retried: a launcher that failed is created
	// again on the same workers, a worker that failed or vanished restarts the whole job.
	// Defaults to 0 (no retry).
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// Suspend, while true, keeps the job without pods, as MPI Operator's runPolicy.suspend: the
	// placer deletes the pods of a job that was placed and releases its cores, keeps the job, its
	// Secret, ConfigMap and Service, and places it again from scratch once Suspend is false.
	// A finished job is not changed by it.
	Suspend bool `json:"suspend,omitempty"`
}

// Phase is where a job is in its life.
type Phase string

// Job phases.
const (
	// PhasePending: accepted, waiting for its gang to fit.
	PhasePending Phase = "Pending"
	// PhaseRunning: workers bound and the launcher created.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the launcher exited 0.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the launcher failed or the spec is invalid.
	PhaseFailed Phase = "Failed"
	// PhaseSuspended: runPolicy.suspend is true; the job has no pods.
	PhaseSuspended Phase = "Suspended"
)

// HPCJobStatus is what the placer reports.
type HPCJobStatus struct {
	Phase Phase `json:"phase,omitempty"`
	// Nodes, Workers and Groups are Nn, Nw and Ng as chosen.
	Nodes   int32 `json:"nodes,omitempty"`
	Workers int32 `json:"workers,omitempty"`
	Groups  int32 `json:"groups,omitempty"`
	// Placements lists where each worker was bound.
	Placements []WorkerPlacement  `json:"placements,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// SubmitTime, StartTime and CompletionTime give response time and makespan.
	SubmitTime     *metav1.Time `json:"submitTime,omitempty"`
	StartTime      *metav1.Time `json:"startTime,omitempty"`
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// LastRescaleTime is when an elastic job last changed size.
	LastRescaleTime *metav1.Time `json:"lastRescaleTime,omitempty"`
	// LauncherCreationTime is when the launcher pod of the current run was created; unset while
	// the launcher waits for the workers.
	LauncherCreationTime *metav1.Time `json:"launcherCreationTime,omitempty"`
	// Restarts counts the retries spent from runPolicy.backoffLimit.
	Restarts           int32 `json:"restarts,omitempty"`
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WorkerPlacement is one worker's binding.
type WorkerPlacement struct {
	Worker   string `json:"worker"`
	Tasks    int32  `json:"tasks"`
	Group    int32  `json:"group"`
	Node     string `json:"node"`
	NUMANode int32  `json:"numaNode"`
}
