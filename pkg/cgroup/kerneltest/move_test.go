package kerneltest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// TestMoveProcesses moves processes of a shared container into a pinned container's cgroups,
// as the agent confines a Slurm job's processes to its placeholder: each lands in the pinned
// container in every hierarchy (cpuset, cpu and memory on v1), its affinity becomes the pinned
// CPUs, a process that exited meanwhile is left out without an error, and moving again changes
// nothing.
func TestMoveProcesses(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			sleep, err := exec.LookPath("sleep")
			if err != nil {
				t.Skipf("needs a sleep command: %v", err)
			}
			k := newKernel(t, v, cgroup.Cgroupfs)
			exclusive, shared, mems := k.pools()
			src, dst := ref(t, uidS, "Burstable", idS1), ref(t, uidW, "Guaranteed", idW)
			k.addContainer(src)
			k.addContainer(dst)
			k.apply(src, cgroup.Resources{CPUs: shared, Mems: k.mems})
			k.apply(dst, cgroup.Exclusive(exclusive, mems))
			a := startSleep(t, sleep, "X=1", k.dirs(src)...)
			b := startSleep(t, sleep, "X=2", k.dirs(src)...)
			exited := exitedPID(t)

			for range 2 {
				moved, err := k.fs.MoveProcesses(dst, []int{a, exited, b})
				if err != nil || len(moved) != 2 || moved[0] != a || moved[1] != b {
					t.Fatalf("MoveProcesses = %v, %v; want [%d %d] (%d exited)", moved, err, a, b, exited)
				}
			}
			for _, pid := range []int{a, b} {
				for _, dir := range k.dirs(dst) {
					if procs := k.read(dir, "cgroup.procs"); !containsLine(procs, pid) {
						t.Errorf("process %d not in %s/cgroup.procs (%q)", pid, dir, procs)
					}
				}
				var set unix.CPUSet
				if err := unix.SchedGetaffinity(pid, &set); err != nil {
					t.Fatal(err)
				}
				for cpu := range 1024 {
					if set.IsSet(cpu) != exclusive.Contains(cpu) {
						t.Errorf("process %d: CPU %d allowed %t after the move, want the pinned CPUs %s", pid, cpu, set.IsSet(cpu), exclusive)
						break
					}
				}
			}
			if v == cgroup.V1 {
				if got := k.read(k.dirs(dst)[0], "cpuset.memory_migrate"); got != "1" {
					t.Errorf("cpuset.memory_migrate = %q, want 1", got)
				}
			}
		})
	}
}

// exitedPID returns the PID of a process that has exited and been reaped.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func containsLine(s string, pid int) bool {
	for _, l := range strings.Fields(s) {
		if l == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}
