// Package slurm is finegrain's side of a virtual cluster's Slurm (22.05): the job as the
// delegation bridge needs it (what it asks for, whether finegrain holds it, whether it has ended),
// the parser of `squeue --json`, the client that runs Slurm's own commands (squeue, scontrol)
// through a Runner — locally, or in the slurmctld pod — and the job_submit.lua script that hands
// every new job to finegrain. It must not talk to the Kubernetes API server or decide placements.
package slurm

import (
	"fmt"
	"strconv"
)

// JobID is a Slurm job ID.
type JobID uint32

func (id JobID) String() string { return strconv.FormatUint(uint64(id), 10) }

// ParseJobID reads a job ID as Slurm prints it ("42").
func ParseJobID(s string) (JobID, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("Slurm job ID %q is not a positive decimal number", s)
	}
	return JobID(v), nil
}

// State is a job's base state as squeue's job_state names it.
type State string

// Job states of Slurm 22.05 (slurm.h's job_states, as squeue --json writes them).
const (
	StatePending     State = "PENDING"
	StateRunning     State = "RUNNING"
	StateSuspended   State = "SUSPENDED"
	StateCompleting  State = "COMPLETING"
	StateConfiguring State = "CONFIGURING"
	StateCompleted   State = "COMPLETED"
	StateCancelled   State = "CANCELLED"
	StateFailed      State = "FAILED"
	StateTimeout     State = "TIMEOUT"
	StateNodeFail    State = "NODE_FAIL"
	StatePreempted   State = "PREEMPTED"
	StateBootFail    State = "BOOT_FAIL"
	StateDeadline    State = "DEADLINE"
	StateOutOfMemory State = "OUT_OF_MEMORY"
)

// Hold reasons: a job whose priority is 0 waits with one of these.
const (
	ReasonHeldUser  = "JobHeldUser"
	ReasonHeldAdmin = "JobHeldAdmin"
)

// MiB is Slurm's memory unit ("M" in --mem, memory_per_node in squeue --json).
const MiB = 1 << 20

// Job is one Slurm job as squeue reports it: what it asks for and where it is in its life.
type Job struct {
	ID        JobID
	Name      string
	User      string
	Partition string
	State     State
	// Reason is squeue's state_reason (JobHeldUser, Resources, None, ...).
	Reason string
	// Priority is 0 while the job is held.
	Priority int64
	// Nodes is how many nodes the job asks for (squeue's node_count: its minimum).
	Nodes int
	// Tasks is how many tasks (ranks) the job runs.
	Tasks int
	// CPUs is how many CPUs the whole job asks for (tasks × CPUs per task, at least one a node).
	CPUs int
	// MinCPUsPerNode is the fewest CPUs the job takes on each of its nodes.
	MinCPUsPerNode int
	// MemoryPerNode and MemoryPerCPU are in bytes, 0 when the job gives neither (Slurm then
	// uses its DefMemPerCPU/DefMemPerNode, or the whole node).
	MemoryPerNode, MemoryPerCPU int64
	// RequiredNodes is the job's ReqNodeList; NodeList the nodes it runs (ran) on.
	RequiredNodes, NodeList string
	// Comment is the user's --comment; AdminComment what only an administrator can write.
	Comment, AdminComment string
	// ExitCode is the batch script's exit status once the job ended.
	ExitCode int
}

// Held reports whether the job waits at priority 0: as job_submit.lua leaves every new job,
// and as `scontrol hold` leaves one.
func (j Job) Held() bool {
	return j.State == StatePending && j.Priority == 0 && (j.Reason == ReasonHeldUser || j.Reason == ReasonHeldAdmin)
}

// Ended reports whether the job is over: it will not run again (unless requeued, which makes
// it PENDING again).
func (j Job) Ended() bool {
	switch j.State {
	case StateCompleted, StateCancelled, StateFailed, StateTimeout, StateNodeFail, StatePreempted,
		StateBootFail, StateDeadline, StateOutOfMemory:
		return true
	}
	return false
}

// Active reports whether Slurm has started the job and its processes may run: running,
// suspended, or being set up or torn down on its nodes.
func (j Job) Active() bool {
	switch j.State {
	case StateRunning, StateSuspended, StateCompleting, StateConfiguring:
		return true
	}
	return false
}

// CPUsPerNode is how many CPUs the job needs on each of its nodes: its CPUs spread over its
// nodes, rounded up, and at least its minimum per node.
func (j Job) CPUsPerNode() int {
	n := max(j.Nodes, 1)
	return max((j.CPUs+n-1)/n, j.MinCPUsPerNode, 1)
}

// MemoryOnNode is the memory the job asks for on each node given cpus CPUs there, in bytes; 0
// when the job gives none.
func (j Job) MemoryOnNode(cpus int) int64 {
	if j.MemoryPerNode > 0 {
		return j.MemoryPerNode
	}
	return j.MemoryPerCPU * int64(cpus)
}
