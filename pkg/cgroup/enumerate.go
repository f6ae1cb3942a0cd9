package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/utils/cpuset"
)

// Container is a container cgroup found under kubepods, with the cpusets it carries.
type Container struct {
	Ref ContainerRef
	// Dir is the container's directory in the hierarchy that carries the cpuset controller.
	Dir string
	// CPUs and Mems are the cgroup's own settings; on v2 empty means "inherit".
	CPUs, Mems                   cpuset.CPUSet
	EffectiveCPUs, EffectiveMems cpuset.CPUSet
}

// Enumerate lists every container cgroup below kubepods in the hierarchy that carries the
// cpuset controller, in directory order. Directories the configured driver does not name
// (runtime helper cgroups such as CRI-O's conmon, anything else someone created) are skipped
// and logged at debug level; containers that vanish during the walk are skipped.
func (f *FS) Enumerate() ([]Container, error) {
	top := f.layout.KubepodsDir(CPUSet)
	if _, err := os.Stat(top); err != nil {
		return nil, fmt.Errorf("enumerate containers: %s: check that the cgroup driver (%s) and base %q match the kubelet's: %w: %w", top, f.layout.Driver, f.layout.Base, ErrKubepodsMissing, err)
	}
	var out []Container
	if err := f.enumerate(top, f.layout.Driver.kubepods(), &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (f *FS) enumerate(dir, rel string, out *[]Container) error {
	entries, err := os.ReadDir(dir)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enumerate containers: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		childDir, childRel := filepath.Join(dir, e.Name()), rel+"/"+e.Name()
		loc, err := ParseRelPath(f.layout.Driver, childRel)
		if err != nil {
			f.log.Debug("skip cgroup", "dir", childDir, "reason", err.Error())
			continue
		}
		ref, isContainer := loc.ContainerRef()
		if !isContainer {
			if err := f.enumerate(childDir, childRel, out); err != nil {
				return err
			}
			continue
		}
		c, err := f.readContainer(ref, childDir)
		if errors.Is(err, ErrVanished) {
			f.log.Debug("skip vanished container", "dir", childDir)
			continue
		}
		if err != nil {
			return fmt.Errorf("enumerate containers: %w", err)
		}
		*out = append(*out, c)
	}
	return nil
}

func (f *FS) readContainer(ref ContainerRef, dir string) (Container, error) {
	effCPUs, effMems := fileV1EffCPUs, fileV1EffMems
	if f.layout.Mounts.Version == V2 {
		effCPUs, effMems = fileV2EffCPUs, fileV2EffMems
	}
	c := Container{Ref: ref, Dir: dir}
	for _, v := range []struct {
		file string
		dst  *cpuset.CPUSet
	}{{fileCPUs, &c.CPUs}, {fileMems, &c.Mems}, {effCPUs, &c.EffectiveCPUs}, {effMems, &c.EffectiveMems}} {
		set, err := f.readSet(ref, CPUSet, dir, v.file)
		if err != nil {
			return Container{}, err
		}
		*v.dst = set
	}
	return c, nil
}
