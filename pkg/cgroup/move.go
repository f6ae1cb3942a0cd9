package cgroup

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/opencontainers/cgroups"
)

// MaxMovePIDs bounds the processes one MoveProcesses call moves.
const MaxMovePIDs = MaxProcessLimit

// MoveProcesses moves processes into a container's own cgroup, the one the kubelet made and the
// agent located from the container's validated pod UID, QoS class and ID: the confinement of a
// Slurm job's processes in its placeholder container (docs/slurm.md). On cgroup v1 each
// PID is written to cgroup.procs of the memory, cpu and then cpuset hierarchy, the cpuset last
// and after cpuset.memory_migrate is 1 there (as for a pin), so that the process's pages follow
// it to the container's memory nodes and a process still listed in its old cpuset cgroup has not
// finished moving (a retry writes it again; writing a PID where it already is changes nothing).
// On v2 one write to the unified hierarchy moves it. The kernel resets a moved task's CPU
// affinity to the destination's cpuset. It returns the PIDs moved; a process that exited
// meanwhile (ESRCH) is left out without an error. Nothing is created: a vanished container yields
// an error wrapping ErrVanished.
func (f *FS) MoveProcesses(ref ContainerRef, pids []int) ([]int, error) {
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("container cgroup: %w", err)
	}
	if len(pids) > MaxMovePIDs {
		return nil, fmt.Errorf("container %s: %d processes to move: at most %d at a time", ref, len(pids), MaxMovePIDs)
	}
	for _, pid := range pids {
		if pid < 1 {
			return nil, fmt.Errorf("container %s: process ID %d to move: want a positive PID", ref, pid)
		}
	}
	hierarchies := []Controller{CPUSet}
	if f.layout.Mounts.Version == V1 {
		hierarchies = []Controller{Memory, CPU, CPUSet}
		dir := f.layout.containerDir(CPUSet, ref)
		old, err := f.read(ref, CPUSet, dir, fileMemMigrate)
		if err != nil {
			return nil, err
		}
		if old != "1" {
			if err := f.writeFile(ref, Write{Dir: dir, File: fileMemMigrate, Old: old, New: "1"}); err != nil {
				return nil, err
			}
		}
	}
	var moved []int
	for _, pid := range pids {
		gone := false
		for _, c := range hierarchies {
			dir := f.layout.containerDir(c, ref)
			err := cgroups.WriteFile(dir, fileProcs, strconv.Itoa(pid))
			if errors.Is(err, syscall.ESRCH) {
				gone = true
				break
			}
			if err != nil {
				if isGone(err) {
					return moved, f.classify(ref, c, dir, fileProcs, "move a process to", err)
				}
				return moved, fmt.Errorf("container %s: move process %d to %s: %w", ref, pid, dir, err)
			}
		}
		if !gone {
			moved = append(moved, pid)
		}
	}
	if len(moved) > 0 {
		f.log.Debug("processes moved", "container", ref.String(), "pids", moved)
	}
	return moved, nil
}
