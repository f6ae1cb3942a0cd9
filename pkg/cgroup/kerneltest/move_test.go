package kerneltest

import (
	"errors"
	"io/fs"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/internal/threadcaps"
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
			k, sleep, src, dst, exclusive := moveSetup(t, v)
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

// A writer without capabilities may not move a process that holds capabilities (root's sleep,
// as slurmstepd in a container) into a cpuset of other CPUs: the move fails with a permission
// error and the process keeps its cpuset. CAP_SYS_NICE alone suffices. This is why the node agent
// needs SYS_NICE to confine Slurm jobs (docs/slurm.md, "Confinement").
func TestMoveProcessesNeedsSysNice(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			// startSleep's child dies with the thread that started it (Pdeathsig), and threadcaps
			// ends the threads it runs on: this goroutine keeps its thread for the test.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			k, sleep, src, dst, _ := moveSetup(t, v)
			a := startSleep(t, sleep, "X=1", k.dirs(src)...)
			var moved []int
			var moveErr error
			if err := threadcaps.Without(func() error { moved, moveErr = k.fs.MoveProcesses(dst, []int{a}); return nil }); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(moveErr, fs.ErrPermission) || len(moved) != 0 {
				t.Fatalf("without capabilities: MoveProcesses = %v, %v; want a permission error", moved, moveErr)
			}
			if cpuset := k.dirs(dst)[0]; containsLine(k.read(cpuset, "cgroup.procs"), a) {
				t.Fatalf("process %d in %s without capabilities", a, cpuset)
			}
			if err := threadcaps.Only(unix.CAP_SYS_NICE, func() error { moved, moveErr = k.fs.MoveProcesses(dst, []int{a}); return nil }); err != nil {
				t.Fatal(err)
			}
			if moveErr != nil || len(moved) != 1 {
				t.Fatalf("with CAP_SYS_NICE: MoveProcesses = %v, %v; want process %d moved", moved, moveErr, a)
			}
			for _, dir := range k.dirs(dst) {
				if procs := k.read(dir, "cgroup.procs"); !containsLine(procs, a) {
					t.Errorf("process %d not in %s/cgroup.procs (%q) after the move with CAP_SYS_NICE", a, dir, procs)
				}
			}
		})
	}
}

// moveSetup makes a shared container (src) and a container pinned to exclusive CPUs (dst).
func moveSetup(t *testing.T, v cgroup.Version) (k *kernel, sleep string, src, dst cgroup.ContainerRef, exclusive cpuset.CPUSet) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("needs a sleep command: %v", err)
	}
	k = newKernel(t, v, cgroup.Cgroupfs)
	exclusive, shared, mems := k.pools()
	src, dst = ref(t, uidS, "Burstable", idS1), ref(t, uidW, "Guaranteed", idW)
	k.addContainer(src)
	k.addContainer(dst)
	k.apply(src, cgroup.Resources{CPUs: shared, Mems: k.mems})
	k.apply(dst, cgroup.Exclusive(exclusive, mems))
	return k, sleep, src, dst, exclusive
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
