package agent

import (
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// Path is how the agent learnt of a container cgroup it wrote.
type Path string

// Paths.
const (
	// PathInotify: an inotify event on the kubepods tree.
	PathInotify Path = "inotify"
	// PathInformer: the container ID in the pod's status, from the API server.
	PathInformer Path = "informer"
	// PathScan: the periodic listing of the kubepods tree (a missed event, or inotify disabled).
	PathScan Path = "scan"
	// PathStartup: the listing at start-up.
	PathStartup Path = "startup"
	// PathDecide: a synchronous caller (the NRI plugin) through Decide, before the container
	// existed.
	PathDecide Path = "nri"
)

// ErrorReason classifies what went wrong, for logs and error counters.
type ErrorReason string

// Error reasons.
const (
	ErrAllocate      ErrorReason = "allocate"
	ErrCgroupWrite   ErrorReason = "cgroup-write"
	ErrVanished      ErrorReason = "container-vanished"
	ErrEnumerate     ErrorReason = "cgroup-enumerate"
	ErrResolve       ErrorReason = "cri-resolve"
	ErrCheckpoint    ErrorReason = "checkpoint-write"
	ErrKubeletPolicy ErrorReason = "kubelet-static-policy"
	ErrKubeletState  ErrorReason = "kubelet-state-unreadable"
	ErrIOLimit       ErrorReason = "io-limit"
)

// IOWrite is what an I/O limit write did to a pod.
type IOWrite string

// I/O limit writes.
const (
	// IOSet: a pod got the limit its ServiceObjective decides (or a new one).
	IOSet IOWrite = "set"
	// IOCleared: a pod no objective holds lost a limit.
	IOCleared IOWrite = "cleared"
	// IORepaired: a pod's cgroup no longer carried the limit the agent had written.
	IORepaired IOWrite = "repaired"
)

// Hooks receives what the agent does, for metrics. The agent may call them while it holds its
// state lock: they must return quickly, never block and never call back into the Agent. Embed
// NopHooks to implement only some.
type Hooks interface {
	// PinWritten: an exclusive pin reached a container's cgroup for the first time. window runs
	// from when the agent noticed the cgroup (the inotify event for PathInotify; for the other
	// paths the moment of noticing, so a lower bound) to the end of the write; it is zero for
	// PathDecide when the runtime created the cgroup already carrying the pin.
	PinWritten(path Path, window time.Duration)
	// Allocated and Released: exclusive CPUs were handed out or returned.
	Allocated(a policy.Assignment)
	Released(a policy.Assignment)
	// DriftRepaired: a container's cgroup no longer carried what the agent had written, and was
	// rewritten.
	DriftRepaired(ref cgroup.ContainerRef)
	// Failed: something went wrong (counted by reason; the log says what).
	Failed(reason ErrorReason)
	// CheckpointWritten: a checkpoint write finished (err nil) or failed.
	CheckpointWritten(took time.Duration, err error)
	// Reconciled: the start-up rebuild repaired something (policy.Reconcile's report).
	Reconciled(r policy.Repair)
	// IOLimitWritten: a pod's I/O bandwidth limit was written.
	IOLimitWritten(w IOWrite)
	// SlurmProcessesConfined: n processes of a Slurm job were moved into its placeholder's cgroup.
	SlurmProcessesConfined(n int)
}

// NopHooks implements Hooks doing nothing.
type NopHooks struct{}

var _ Hooks = NopHooks{}

func (NopHooks) PinWritten(Path, time.Duration)         {}
func (NopHooks) Allocated(policy.Assignment)            {}
func (NopHooks) Released(policy.Assignment)             {}
func (NopHooks) DriftRepaired(cgroup.ContainerRef)      {}
func (NopHooks) Failed(ErrorReason)                     {}
func (NopHooks) CheckpointWritten(time.Duration, error) {}
func (NopHooks) Reconciled(policy.Repair)               {}
func (NopHooks) IOLimitWritten(IOWrite)                 {}
func (NopHooks) SlurmProcessesConfined(int)             {}
