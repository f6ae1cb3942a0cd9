package cgroup

import (
	"k8s.io/utils/cpuset"
)

// Result reports what an Apply or Execute did.
type Result struct {
	// Changes are the writes performed, in order; empty when nothing differed. After an error
	// they are the writes that succeeded before it.
	Changes []Write
	// EffectiveCPUs and EffectiveMems are what the container really gets after the writes,
	// read back when a cpuset value was applied (on v2 an ancestor may narrow them below
	// the container's own cpuset.cpus).
	EffectiveCPUs cpuset.CPUSet
	EffectiveMems cpuset.CPUSet
}

// Apply plans and executes in one step.
func (f *FS) Apply(ref ContainerRef, want Resources) (Result, error) {
	p, err := f.Plan(ref, want)
	if err != nil {
		return Result{}, err
	}
	return f.Execute(p)
}

// Execute performs a plan's writes in order and stops at the first failure. It never creates a
// cgroup: a container that vanished since the plan was made yields an error wrapping
// ErrVanished, and the caller should drop the container instead of retrying.
func (f *FS) Execute(p Plan) (Result, error) {
	var res Result
	for _, w := range p.writes {
		if err := f.writeFile(p.ref, w); err != nil {
			return res, err
		}
		res.Changes = append(res.Changes, w)
	}
	if p.cpusetDir == "" {
		return res, nil
	}
	cpusFile, memsFile := fileV1EffCPUs, fileV1EffMems
	if f.layout.Mounts.Version == V2 {
		cpusFile, memsFile = fileV2EffCPUs, fileV2EffMems
	}
	var err error
	if res.EffectiveCPUs, err = f.readSet(p.ref, CPUSet, p.cpusetDir, cpusFile); err != nil {
		return res, err
	}
	if res.EffectiveMems, err = f.readSet(p.ref, CPUSet, p.cpusetDir, memsFile); err != nil {
		return res, err
	}
	return res, nil
}
