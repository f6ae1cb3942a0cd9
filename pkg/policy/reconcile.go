package policy

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// RepairReason says why Reconcile changed something.
type RepairReason string

// Repair reasons.
const (
	ReasonCheckpointAbsent     RepairReason = "CheckpointAbsent"
	ReasonCheckpointUnreadable RepairReason = "CheckpointUnreadable"
	ReasonForeignCheckpoint    RepairReason = "ForeignCheckpoint"
	ReasonReservedOffline      RepairReason = "ReservedOffline"
	ReasonReservedChanged      RepairReason = "ReservedChanged"
	ReasonCPUOffline           RepairReason = "CPUOffline"
	ReasonOverlap              RepairReason = "Overlap"
	ReasonReservedOverlap      RepairReason = "ReservedOverlap"
	ReasonInvalidAssignment    RepairReason = "InvalidAssignment"
	ReasonDuplicate            RepairReason = "Duplicate"
	ReasonSharedMinimum        RepairReason = "SharedMinimum"
	ReasonSizeChanged          RepairReason = "SizeChanged"
	ReasonContainerGone        RepairReason = "ContainerGone"
	ReasonCgroupDisagrees      RepairReason = "CgroupDisagrees"
	ReasonAdoptedFromCgroup    RepairReason = "AdoptedFromCgroup"
	ReasonNotPinned            RepairReason = "NotPinned"
)

// RepairAction says what Reconcile did about it, and what the agent must do next.
type RepairAction string

// Repair actions.
const (
	// ActionRebuild: the checkpoint was not used; state is rebuilt from the cgroups.
	ActionRebuild RepairAction = "rebuild-from-cgroups"
	// ActionUseConfig: the configured reserved set replaces the checkpoint's.
	ActionUseConfig RepairAction = "use-config"
	// ActionDrop: the entry was removed; its container no longer exists.
	ActionDrop RepairAction = "drop"
	// ActionAllocate: the container has no exclusive entry; the agent must Allocate for it and
	// write the result to its cgroup.
	ActionAllocate RepairAction = "allocate"
	// ActionRewriteCgroup: the entry stands; the agent must rewrite the container's cgroup to it.
	ActionRewriteCgroup RepairAction = "rewrite-cgroup"
	// ActionAdopt: the entry was taken from what the container's cgroup carries.
	ActionAdopt RepairAction = "adopt"
)

// Repair is one change Reconcile made, for the agent's log, events and metrics.
type Repair struct {
	Reason RepairReason
	Action RepairAction
	// Key is the container concerned; zero for repairs about the checkpoint as a whole.
	Key Key
	// CPUs are the CPUs concerned, when there are any.
	CPUs   cpuset.CPUSet
	Detail string
}

func (r Repair) String() string {
	if r.Key == (Key{}) {
		return fmt.Sprintf("%s (%s): %s", r.Reason, r.Action, r.Detail)
	}
	return fmt.Sprintf("%s (%s) for %s: %s", r.Reason, r.Action, r.Key, r.Detail)
}

// Observed is what the cgroup of a container that should be pinned carries now: a container of a
// pod that asks for exclusive cores, found on the node at start-up.
type Observed struct {
	Key Key
	// RequestedCPUs is the container's integer CPU request (see CPUCount).
	RequestedCPUs int
	// CPUs and Mems are the cgroup's cpuset.cpus and cpuset.mems.
	CPUs, Mems cpuset.CPUSet
}

// ReconcileInput is everything Reconcile weighs.
type ReconcileInput struct {
	Topology *topology.Topology
	Config   Config
	// Host is this node's name.
	Host string
	// Checkpoint is the decoded checkpoint, nil when there is none or it could not be read;
	// CheckpointErr says why it could not be read (nil when the file is simply absent).
	Checkpoint    *Checkpoint
	CheckpointErr error
	// Observed lists every live container that should be pinned. A checkpoint entry for a
	// container not listed here is dropped.
	Observed []Observed
}

// Reconcile builds the allocator state at start-up from the discovered topology, the configured
// pools, the checkpoint and the cgroups, repairing rather than refusing: the checkpoint is
// trusted for containers that still exist when it belongs to this machine and its entries still
// fit the topology and the reserved set; containers without a usable entry keep what their cgroup
// carries when that is a valid pin of the requested size, and are otherwise marked for
// allocation. It fails only when the configuration itself cannot work on this topology.
func Reconcile(in ReconcileInput) (*Allocator, []Repair, error) {
	var repairs []Repair
	report := func(r Repair) { repairs = append(repairs, r) }

	cfg := in.Config
	if off := cfg.ReservedCPUs.Difference(in.Topology.OnlineCPUs); !off.IsEmpty() {
		cfg.ReservedCPUs = cfg.ReservedCPUs.Intersection(in.Topology.OnlineCPUs)
		report(Repair{Reason: ReasonReservedOffline, Action: ActionUseConfig, CPUs: off,
			Detail: fmt.Sprintf("reserved CPUs %s are not online; reserving %s until they return", off, cfg.ReservedCPUs)})
	}
	a, err := New(in.Topology, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: %w", err)
	}

	cp := usableCheckpoint(in, a, report)
	observed := map[Key]Observed{}
	for _, o := range in.Observed {
		if _, dup := observed[o.Key]; !dup {
			observed[o.Key] = o
		}
	}
	handled := map[Key]bool{}
	if cp != nil {
		for _, asg := range cp.Assignments {
			restoreEntry(a, asg, observed, handled, report)
		}
	}

	keys := make([]Key, 0, len(observed))
	for k := range observed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		if !handled[k] {
			adopt(a, observed[k], report)
		}
	}
	if err := a.Verify(); err != nil {
		return nil, nil, fmt.Errorf("reconcile produced an inconsistent state: %w", err)
	}
	return a, repairs, nil
}

// usableCheckpoint returns the checkpoint when it can be trusted on this machine, reporting why
// not otherwise.
func usableCheckpoint(in ReconcileInput, a *Allocator, report func(Repair)) *Checkpoint {
	cp := in.Checkpoint
	switch {
	case cp == nil && in.CheckpointErr != nil:
		report(Repair{Reason: ReasonCheckpointUnreadable, Action: ActionRebuild,
			Detail: fmt.Sprintf("the checkpoint cannot be used (%v); pins are rebuilt from the cgroups", in.CheckpointErr)})
		return nil
	case cp == nil:
		if len(in.Observed) > 0 {
			report(Repair{Reason: ReasonCheckpointAbsent, Action: ActionRebuild,
				Detail: fmt.Sprintf("there is no checkpoint but %d containers should be pinned; pins are rebuilt from the cgroups", len(in.Observed))})
		}
		return nil
	}
	if fp := Fingerprint(in.Topology); cp.Topology != fp || (cp.Host != "" && in.Host != "" && cp.Host != in.Host) {
		report(Repair{Reason: ReasonForeignCheckpoint, Action: ActionRebuild,
			Detail: fmt.Sprintf("the checkpoint was written on host %q with topology %s, this is host %q with topology %s; pins are rebuilt from the cgroups",
				cp.Host, cp.Topology, in.Host, fp)})
		return nil
	}
	if !cp.Reserved.Equals(a.reserved) {
		report(Repair{Reason: ReasonReservedChanged, Action: ActionUseConfig, CPUs: a.reserved,
			Detail: fmt.Sprintf("the checkpoint reserved %q, the configuration reserves %q; entries that overlap the new reserved CPUs are reallocated", cp.Reserved, a.reserved)})
	}
	return cp
}

// restoreEntry re-adds one checkpoint entry, or drops it with a repair.
func restoreEntry(a *Allocator, asg Assignment, observed map[Key]Observed, handled map[Key]bool, report func(Repair)) {
	key := asg.Key
	if handled[key] {
		report(Repair{Reason: ReasonDuplicate, Action: ActionDrop, Key: key, CPUs: asg.CPUs,
			Detail: fmt.Sprintf("the checkpoint lists the container twice; the second entry %s is dropped", asg.CPUs)})
		return
	}
	obs, live := observed[key]
	if !live {
		report(Repair{Reason: ReasonContainerGone, Action: ActionDrop, Key: key, CPUs: asg.CPUs,
			Detail: fmt.Sprintf("the container no longer exists; CPUs %s return to the shared pool", asg.CPUs)})
		return
	}
	handled[key] = true
	if obs.RequestedCPUs != asg.CPUs.Size() {
		report(Repair{Reason: ReasonSizeChanged, Action: ActionAllocate, Key: key, CPUs: asg.CPUs,
			Detail: fmt.Sprintf("the checkpoint holds %d CPUs (%s) but the container now requests %d", asg.CPUs.Size(), asg.CPUs, obs.RequestedCPUs)})
		return
	}
	if err := a.Restore(asg); err != nil {
		report(restoreRepair(key, asg.CPUs, err, "checkpoint entry"))
		return
	}
	got, _ := a.Lookup(key)
	if !obs.CPUs.Equals(got.CPUs) || !obs.Mems.Equals(got.Mems) {
		report(Repair{Reason: ReasonCgroupDisagrees, Action: ActionRewriteCgroup, Key: key, CPUs: got.CPUs,
			Detail: fmt.Sprintf("the cgroup carries cpus %q mems %q, the checkpoint cpus %q mems %q", obs.CPUs, obs.Mems, got.CPUs, got.Mems)})
	}
}

// adopt keeps what a container's cgroup carries when it is a valid pin of the requested size.
func adopt(a *Allocator, obs Observed, report func(Repair)) {
	key := obs.Key
	node := topology.NoNUMA
	if !obs.CPUs.IsEmpty() {
		node = a.topo.NUMANodeOfCPU(obs.CPUs.List()[0])
	}
	valid := node != topology.NoNUMA && obs.CPUs.Size() == obs.RequestedCPUs && obs.Mems.Equals(cpuset.New(int(node)))
	if !valid {
		report(Repair{Reason: ReasonNotPinned, Action: ActionAllocate, Key: key, CPUs: obs.CPUs,
			Detail: fmt.Sprintf("no usable entry; the cgroup carries cpus %q mems %q, not %d CPUs of one NUMA node", obs.CPUs, obs.Mems, obs.RequestedCPUs)})
		return
	}
	if err := a.Restore(Assignment{Key: key, CPUs: obs.CPUs, NUMANode: node, Mems: obs.Mems}); err != nil {
		report(restoreRepair(key, obs.CPUs, err, "cgroup's pin"))
		return
	}
	report(Repair{Reason: ReasonAdoptedFromCgroup, Action: ActionAdopt, Key: key, CPUs: obs.CPUs,
		Detail: fmt.Sprintf("no usable checkpoint entry; keeping the cgroup's cpus %q mems %q", obs.CPUs, obs.Mems)})
}

func restoreRepair(key Key, cpus cpuset.CPUSet, err error, what string) Repair {
	reason := ReasonInvalidAssignment
	if re := (*RestoreError)(nil); errors.As(err, &re) {
		reason = re.Reason
	}
	return Repair{Reason: reason, Action: ActionAllocate, Key: key, CPUs: cpus,
		Detail: fmt.Sprintf("the %s cannot be kept: %v", what, err)}
}
