package v1alpha1

// Well-known label and annotation names (docs/interfaces.md is the contract for the shared ones).
const (
	// LabelPinning with value PinningExclusive asks the node agent for exclusive cores.
	LabelPinning     = "finegrain.dev/pinning"
	PinningExclusive = "exclusive"
	// AnnotationNUMANode is the NUMA node the placer chose; only the placer writes it.
	AnnotationNUMANode = "finegrain.dev/numa-node"
	// LabelJob names the HPCJob a worker or launcher belongs to.
	LabelJob = "finegrain.dev/job"
	// LabelRole is RoleWorker or RoleLauncher.
	LabelRole    = "finegrain.dev/role"
	RoleWorker   = "worker"
	RoleLauncher = "launcher"
	// LabelPodGroup and LabelPodGroupMinAvailable make plain pods a gang.
	LabelPodGroup             = "pod-group.scheduling.x-k8s.io/name"
	LabelPodGroupMinAvailable = "pod-group.scheduling.x-k8s.io/min-available"

	// AnnotationGroup is the task group of a worker (placer-internal).
	AnnotationGroup = "finegrain.dev/group"
	// AnnotationTasks is the number of MPI tasks a worker runs (placer-internal).
	AnnotationTasks = "finegrain.dev/tasks"
	// AnnotationExclusiveNodes marks the workers of a job that wants its nodes to itself, so
	// that later jobs keep off those nodes too (placer-internal).
	AnnotationExclusiveNodes = "finegrain.dev/exclusive-nodes"
	// AnnotationPlacement on the pods of a plain pod gang is the gang's placement policy
	// (LeastLoaded or MostLoaded), as an HPCJob's spec.placement is; absent, least-loaded.
	AnnotationPlacement = "finegrain.dev/placement"

	// DefaultSchedulerName is the schedulerName of every pod the placer binds.
	DefaultSchedulerName = "finegrain-placer"
)

// Limits that keep a job's expansion bounded.
const (
	// MaxTasks bounds spec.tasks.
	MaxTasks = 1_000_000
	// MaxWorkers bounds the number of worker pods of one job.
	MaxWorkers = 10_000
	// MaxCPUPerTask bounds spec.taskResources.cpu (whole CPUs).
	MaxCPUPerTask = 1024
)

// Defaults applied to omitted fields.
const (
	DefaultTimeoutSeconds    = 300
	DefaultRescaleGapSeconds = 60
	// DefaultRescaleTimeoutSeconds bounds a rescale hook's acknowledgement.
	DefaultRescaleTimeoutSeconds = 60
	// DefaultRescalePath is the path of an HTTP rescale hook.
	DefaultRescalePath = "/rescale"
	// DefaultSSHAuthMountPath is where the job's SSH files are mounted: root's ~/.ssh, so that
	// plain ssh finds the identity and the client config.
	DefaultSSHAuthMountPath = "/root/.ssh"
	// DefaultTaskMemoryBytes (1 GiB) is taskResources.memory when the job gives none: a worker's
	// memory request and limit are always set and equal, so with its CPU request and limit the
	// worker pod is Guaranteed, the QoS class scheduler-plugins' NUMA filter checks and counts.
	DefaultTaskMemoryBytes = 1 << 30
)
