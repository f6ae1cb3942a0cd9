package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/utils/cpuset"
)

// maxSubCgroups bounds the sub-cgroups a container may hold below its own cgroup before the
// writer refuses to walk them (each one costs reads on every v1 cpuset change).
const maxSubCgroups = 1024

// Plan is the decision part of an Apply: the writes, in kernel-safe order, that bring one
// container's cgroup from what was read to what is wanted. Only FS.Plan makes plans, so every
// directory in one is a validated path below the cgroup root.
type Plan struct {
	ref    ContainerRef
	writes []Write
	// cpusetDir is the container's cpuset directory when cpuset values were planned, so that
	// Execute can report the effective sets.
	cpusetDir string
}

// Container returns the container the plan is for.
func (p Plan) Container() ContainerRef { return p.ref }

// Writes returns the planned writes in order; an empty plan means the cgroup already carries
// the wanted values (no drift).
func (p Plan) Writes() []Write { return slices.Clone(p.writes) }

// Plan reads a container's cgroup and decides the writes that bring it to want. Nothing is
// written; Execute performs the plan.
func (f *FS) Plan(ref ContainerRef, want Resources) (Plan, error) {
	if err := ref.Validate(); err != nil {
		return Plan{}, fmt.Errorf("container cgroup: %w", err)
	}
	if err := want.Validate(); err != nil {
		return Plan{}, fmt.Errorf("container %s: %w", ref, err)
	}
	p := Plan{ref: ref}
	v := f.layout.Mounts.Version
	if !want.CPUs.IsEmpty() || !want.Mems.IsEmpty() || (want.MigrateMemory && v == V1) {
		var writes []Write
		var err error
		if v == V1 {
			writes, err = f.planCpusetV1(ref, want)
		} else {
			// cgroup v2 migrates a task's pages whenever its cpuset.mems changes: MigrateMemory
			// needs no write.
			writes, err = f.planCpusetV2(ref, want.CPUs, want.Mems)
		}
		if err != nil {
			return Plan{}, err
		}
		p.writes = writes
		p.cpusetDir = f.layout.containerDir(CPUSet, ref)
	}
	var cur Quota
	for _, val := range want.Values(v) {
		if val.Controller == CPUSet {
			continue
		}
		dir := f.layout.containerDir(val.Controller, ref)
		old, err := f.read(ref, val.Controller, dir, val.File)
		if err != nil {
			return Plan{}, err
		}
		if old != val.Data {
			p.writes = append(p.writes, Write{Dir: dir, File: val.File, Old: old, New: val.Data})
		}
		if err := cur.record(val.File, old); err != nil {
			return Plan{}, fmt.Errorf("container %s: %w", ref, err)
		}
	}
	if v == V1 {
		orderV1Bandwidth(p.writes, cur, want.CPUQuota)
	}
	return p, nil
}

// containerDir is ContainerDir for a reference that has already been validated.
func (l Layout) containerDir(c Controller, r ContainerRef) string {
	return filepath.Join(l.Mounts.Root(c), l.Base, l.Driver.containerPath(r))
}

// planCpusetV1 plans cpuset.cpus and cpuset.mems over the container's ancestors (widened
// top-down where they lack the target), the container, and its own sub-cgroups (narrowed
// bottom-up). Ancestors are read upwards from the pod only until one already holds the target:
// by the v1 subset rule every cgroup above it does too, so the common case reads just the pod.
// With want.MigrateMemory, cpuset.memory_migrate becomes 1 on the container and its sub-cgroups
// after the cpus writes and before any mems write: v1 moves a task's pages only when the flag
// is set at the moment its cgroup's mems change.
func (f *FS) planCpusetV1(ref ContainerRef, want Resources) ([]Write, error) {
	cpus, mems := want.CPUs, want.Mems
	chain := f.layout.chain(CPUSet, ref)
	var up []v1Node
	for i := len(chain) - 1; i >= 0; i-- {
		n, err := f.readV1Node(ref, chain[i], -1)
		if err != nil {
			return nil, err
		}
		up = append(up, n)
		if i < len(chain)-1 && cpus.IsSubsetOf(n.cpus) && mems.IsSubsetOf(n.mems) {
			break
		}
	}
	tree := make([]v1Node, len(up))
	for i, n := range up {
		j := len(up) - 1 - i
		n.parent = j - 1
		tree[j] = n
	}
	container := len(tree) - 1
	tree, err := f.walkSubCgroups(ref, tree, container, container)
	if err != nil {
		return nil, err
	}
	var writes []Write
	for _, file := range []struct {
		name   string
		target cpuset.CPUSet
		cur    func(v1Node) cpuset.CPUSet
	}{
		{fileCPUs, cpus, func(n v1Node) cpuset.CPUSet { return n.cpus }},
		{fileMems, mems, func(n v1Node) cpuset.CPUSet { return n.mems }},
	} {
		if file.name == fileMems && want.MigrateMemory {
			mig, err := f.planMigrateV1(ref, tree[container:])
			if err != nil {
				return nil, err
			}
			writes = append(writes, mig...)
		}
		if file.target.IsEmpty() {
			continue
		}
		nodes := make([]cpusetNode, len(tree))
		for i, n := range tree {
			nodes[i] = cpusetNode{dir: n.dir, parent: n.parent, cur: file.cur(n)}
		}
		v1CpusetWants(nodes, container, file.target)
		writes = append(writes, orderV1CpusetWrites(nodes, file.name)...)
	}
	return writes, nil
}

// planMigrateV1 plans cpuset.memory_migrate = 1 where it is not set yet on the container's
// cgroup (nodes[0]) and its sub-cgroups; a sub-cgroup that vanished meanwhile is skipped.
func (f *FS) planMigrateV1(ref ContainerRef, nodes []v1Node) ([]Write, error) {
	var writes []Write
	for i, n := range nodes {
		old, err := f.read(ref, CPUSet, n.dir, fileMemMigrate)
		if i > 0 && (errors.Is(err, ErrVanished) || errors.Is(err, ErrControllerMissing)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if old != "1" {
			writes = append(writes, Write{Dir: n.dir, File: fileMemMigrate, Old: old, New: "1"})
		}
	}
	return writes, nil
}

// v1Node is one cgroup's current v1 cpuset.
type v1Node struct {
	dir        string
	parent     int
	cpus, mems cpuset.CPUSet
}

func (f *FS) readV1Node(ref ContainerRef, dir string, parent int) (v1Node, error) {
	cpus, err := f.readSet(ref, CPUSet, dir, fileCPUs)
	if err != nil {
		return v1Node{}, err
	}
	mems, err := f.readSet(ref, CPUSet, dir, fileMems)
	if err != nil {
		return v1Node{}, err
	}
	return v1Node{dir: dir, parent: parent, cpus: cpus, mems: mems}, nil
}

// walkSubCgroups appends the sub-cgroups below tree[idx] in pre-order; tree[container] is the
// container's own cgroup. Sub-cgroups belong to the container and may disappear at any moment;
// those that do are skipped.
func (f *FS) walkSubCgroups(ref ContainerRef, tree []v1Node, idx, container int) ([]v1Node, error) {
	entries, err := os.ReadDir(tree[idx].dir)
	if err != nil {
		if isGone(err) && idx > container {
			return tree, nil
		}
		return nil, f.classify(ref, CPUSet, tree[idx].dir, "", "list", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if len(tree) > container+maxSubCgroups {
			return nil, fmt.Errorf("container %s: more than %d sub-cgroups below %s: refusing to walk them", ref, maxSubCgroups, tree[idx].dir)
		}
		n, err := f.readV1Node(ref, filepath.Join(tree[idx].dir, e.Name()), idx)
		if errors.Is(err, ErrVanished) || errors.Is(err, ErrControllerMissing) {
			continue
		}
		if err != nil {
			return nil, err
		}
		tree = append(tree, n)
		if tree, err = f.walkSubCgroups(ref, tree, len(tree)-1, container); err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// planCpusetV2 plans the container's own cpuset.cpus and cpuset.mems; v2 needs no ordering
// (a child's effective set is the intersection with its parent's). A container cgroup that is
// itself a partition is refused.
func (f *FS) planCpusetV2(ref ContainerRef, cpus, mems cpuset.CPUSet) ([]Write, error) {
	dir := f.layout.containerDir(CPUSet, ref)
	part, err := f.read(ref, CPUSet, dir, filePartition)
	switch {
	case errors.Is(err, ErrControllerMissing):
		// Kernels before 5.13 have no partitions; a missing cpuset controller shows below.
	case err != nil:
		return nil, err
	case part != partitionMember:
		return nil, fmt.Errorf("container %s: %s is a cpuset partition (%s): leaving its cpuset alone: %w", ref, dir, part, ErrPartition)
	}
	var writes []Write
	for _, v := range []struct {
		file   string
		target cpuset.CPUSet
	}{{fileCPUs, cpus}, {fileMems, mems}} {
		if v.target.IsEmpty() {
			continue
		}
		old, err := f.read(ref, CPUSet, dir, v.file)
		if err != nil {
			return nil, err
		}
		if want := v.target.String(); old != want {
			writes = append(writes, Write{Dir: dir, File: v.file, Old: old, New: want})
		}
	}
	return writes, nil
}

// record remembers the current v1 quota or period read while planning.
func (q *Quota) record(file, canonical string) error {
	var err error
	switch file {
	case fileQuota:
		_, err = fmt.Sscan(canonical, &q.QuotaUS)
	case filePeriod:
		_, err = fmt.Sscan(canonical, &q.PeriodUS)
	}
	if err != nil {
		return fmt.Errorf("%s %q: %w", file, canonical, err)
	}
	return nil
}

// orderV1Bandwidth orders a v1 period and quota change so that the state between the two
// writes asks for the smaller share of a CPU: the kernel checks every write against the
// parent's limit (EINVAL when a child would exceed it), so the intermediate must not exceed
// either end. writes holds at most one write to each file, period before quota.
func orderV1Bandwidth(writes []Write, cur, want Quota) {
	pi := slices.IndexFunc(writes, func(w Write) bool { return w.File == filePeriod })
	qi := slices.IndexFunc(writes, func(w Write) bool { return w.File == fileQuota })
	if pi < 0 || qi < 0 {
		return
	}
	// Period first leaves cur.QuotaUS/want.PeriodUS in between, quota first want.QuotaUS/cur.PeriodUS.
	var quotaFirst bool
	switch {
	case cur.QuotaUS == QuotaUnlimited:
		quotaFirst = true
	case want.QuotaUS != QuotaUnlimited:
		quotaFirst = float64(want.QuotaUS)*float64(want.PeriodUS) < float64(cur.QuotaUS)*float64(cur.PeriodUS)
	}
	if quotaFirst {
		writes[pi], writes[qi] = writes[qi], writes[pi]
	}
}
