package agent

import (
	"fmt"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Options configures the agent; cmd/nodeagent fills it from flags.
type Options struct {
	// NodeName is the node this agent runs on (the pod's spec.nodeName).
	NodeName string
	// Kubeconfig is a kubeconfig file; empty uses the in-cluster service account.
	Kubeconfig string
	// SysfsRoot is where the host's /sys is mounted (topology discovery).
	SysfsRoot string
	// Mountinfo is the mount table that locates the cgroup hierarchies.
	Mountinfo string
	// ProcRoot is the procfs of the PID namespace the cgroup file system reports PIDs in (the
	// host's: the DaemonSet runs with hostPID), read to list a pinned container's processes.
	ProcRoot string
	// CgroupDriver and CgroupBase must match the kubelet's cgroupDriver and cgroupRoot.
	CgroupDriver cgroup.Driver
	CgroupBase   string
	// KubeletRootDir is the kubelet's --root-dir, where its CPU manager state lives.
	KubeletRootDir string
	// CRIEndpoint is the container runtime's socket; empty resolves container names from pod
	// statuses only.
	CRIEndpoint string
	CRITimeout  time.Duration
	// CheckpointPath is the agent's state file (on a hostPath, so it outlives the pod).
	CheckpointPath string

	// ReservedCPUs are never given to pods; MinSharedCPUs is the smallest shared pool.
	ReservedCPUs  cpuset.CPUSet
	MinSharedCPUs int
	// AllowSplitCores lets an exclusive container share a physical core with another.
	AllowSplitCores bool
	// Classify holds the placer's scheduler name and the shared containers' quota policies.
	Classify classify.Config
	// NUMAHintPolicy names the ValidatingAdmissionPolicy (and its binding) that lets only the
	// placer write the NUMA node hint; the agent honours hints only while both are in force
	// (HintPolicyGuard). Empty trusts hints on every pod that names the placer as its scheduler.
	NUMAHintPolicy string

	// IODevicePaths are host directories (the kubelet's and the runtime's storage) whose whole
	// disks carry the pods' I/O bandwidth limits (pkg/blockdev), found once at start in the
	// mount table IOMountinfo (the host's: /proc/1/mountinfo, the DaemonSet runs with hostPID)
	// and SysfsRoot. Empty turns I/O limits off.
	IODevicePaths []string
	IOMountinfo   string

	// Inotify enables the fast path; without it new containers are found through the pods'
	// statuses and the periodic scan.
	Inotify bool
	// SyncDecisions says a synchronous caller (the NRI plugin) decides every container at its
	// creation through Decide; Snapshot then lists PathDecide first.
	SyncDecisions bool
	// ReconcileInterval is the drift check period; FullResyncInterval the period at which every
	// container's quota and memory limit are re-applied too.
	ReconcileInterval  time.Duration
	FullResyncInterval time.Duration
	// SlurmConfineInterval is how often the processes of Slurm jobs are confined to their
	// placeholders (ConfineSlurmJobs), besides on every reconcile tick: a new step's tasks wait in
	// finegrain's TaskProlog until the next pass (docs/slurm.md, "Confinement"). At or
	// above ReconcileInterval, the ticks alone confine; a pass costs next to nothing on a node
	// without a virtual cluster's slurmd.
	SlurmConfineInterval time.Duration
	// KubeletCheckInterval is how often the kubelet's CPU manager policy is re-read.
	KubeletCheckInterval time.Duration
	// StartupAPITimeout bounds the wait for the pod list at start; after it the agent enforces
	// from its checkpoint and the cgroups, and catches up when the API server answers.
	StartupAPITimeout time.Duration

	// Hooks receives what the agent does (metrics); nil for none.
	Hooks Hooks
}

// DefaultNUMAHintPolicy is the admission policy daemonset/policy ships for the NUMA node hint.
const DefaultNUMAHintPolicy = "finegrain-placer-pods"

// DefaultOptions returns the defaults for a standard kubelet installation.
func DefaultOptions() Options {
	return Options{
		SysfsRoot:      "/sys",
		Mountinfo:      "/proc/self/mountinfo",
		ProcRoot:       "/proc",
		CgroupDriver:   cgroup.Cgroupfs,
		KubeletRootDir: "/var/lib/kubelet",
		CRIEndpoint:    "unix:///run/containerd/containerd.sock",
		CRITimeout:     2 * time.Second,
		CheckpointPath: "/var/lib/finegrain/nodeagent/checkpoint.json",
		ReservedCPUs:   cpuset.New(),
		MinSharedCPUs:  1,
		Classify: classify.Config{
			PlacerSchedulerName: classify.DefaultPlacerSchedulerName,
			CPUQuota:            classify.Limit,
			MemoryLimit:         classify.Off,
			CPUPeriodUS:         100000,
		},
		NUMAHintPolicy:       DefaultNUMAHintPolicy,
		IODevicePaths:        []string{"/var/lib/kubelet", "/var/lib/containerd"},
		IOMountinfo:          "/proc/1/mountinfo",
		Inotify:              true,
		ReconcileInterval:    500 * time.Millisecond,
		FullResyncInterval:   10 * time.Second,
		SlurmConfineInterval: 100 * time.Millisecond,
		KubeletCheckInterval: 10 * time.Second,
		StartupAPITimeout:    30 * time.Second,
	}
}

// Validate checks the options that do not need the host.
func (o Options) Validate() error {
	switch {
	case o.NodeName == "":
		return fmt.Errorf("node name is empty: pass --node-name or set NODE_NAME from the pod's spec.nodeName")
	case o.MinSharedCPUs < 1:
		return fmt.Errorf("minimum shared CPUs %d: at least 1, so containers that are not pinned always have a CPU", o.MinSharedCPUs)
	case o.ReconcileInterval <= 0 || o.ReconcileInterval > time.Minute:
		return fmt.Errorf("reconcile interval %s: want more than 0 and at most 1m (500ms repairs drift within a second)", o.ReconcileInterval)
	case o.FullResyncInterval < o.ReconcileInterval:
		return fmt.Errorf("full resync interval %s is shorter than the reconcile interval %s", o.FullResyncInterval, o.ReconcileInterval)
	case o.SlurmConfineInterval <= 0:
		return fmt.Errorf("Slurm confinement interval %s must be positive (a new Slurm step waits for the next pass)", o.SlurmConfineInterval)
	case o.KubeletCheckInterval <= 0:
		return fmt.Errorf("kubelet check interval %s must be positive", o.KubeletCheckInterval)
	case o.StartupAPITimeout <= 0:
		return fmt.Errorf("start-up API timeout %s must be positive", o.StartupAPITimeout)
	case o.CRIEndpoint != "" && o.CRITimeout <= 0:
		return fmt.Errorf("CRI timeout %s must be positive", o.CRITimeout)
	case len(o.IODevicePaths) > 0 && o.IOMountinfo == "":
		return fmt.Errorf("I/O device paths %v without a mount table to find their disks in: set --io-mountinfo (the host's /proc/1/mountinfo)", o.IODevicePaths)
	case o.CheckpointPath == "":
		return fmt.Errorf("checkpoint path is empty: the agent must keep its state on the host to survive restarts")
	}
	if _, err := cgroup.ParseDriver(string(o.CgroupDriver)); err != nil {
		return err
	}
	return o.Classify.Validate()
}
