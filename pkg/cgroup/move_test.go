package cgroup

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// MoveProcesses writes each PID to the container's cgroup.procs of every hierarchy, the cpuset
// last and after its memory_migrate is set on v1; once on v2. (The fixture's files keep only the
// last write; the kernel test checks where real processes land.)
func TestMoveProcessesWrites(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(v.String(), func(t *testing.T) {
			fx := newFixture(t, v, Cgroupfs)
			ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
			fx.addContainer(ref)
			moved, err := fx.fs.MoveProcesses(ref, []int{41, 42})
			if err != nil || len(moved) != 2 {
				t.Fatalf("MoveProcesses = %v, %v; want both moved", moved, err)
			}
			for _, c := range controllers {
				if got := fx.read(fx.dir(c, ref), fileProcs); got != "42" {
					t.Errorf("%s cgroup.procs = %q, want the last PID written", c, got)
				}
			}
			if v == V1 {
				if got := fx.read(fx.dir(CPUSet, ref), fileMemMigrate); got != "1" {
					t.Errorf("cpuset.memory_migrate = %q, want 1 before the move", got)
				}
			}
		})
	}
}

func TestMoveProcessesRefuses(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	before := snapshot(t, fx.root)
	for _, c := range []struct {
		name string
		pids []int
		want string
	}{
		{"PID 0", []int{5, 0}, "want a positive PID"},
		{"negative PID", []int{-1}, "want a positive PID"},
		{"too many", make([]int, MaxMovePIDs+1), "at most 4096 at a time"},
	} {
		if _, err := fx.fs.MoveProcesses(ref, c.pids); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	if _, err := fx.fs.MoveProcesses(ContainerRef{}, []int{5}); err == nil {
		t.Error("an invalid container ref was accepted")
	}
	if d := cmp.Diff(before, snapshot(t, fx.root)); d != "" {
		t.Errorf("a refused move wrote:\n%s", d)
	}
	gone := mustRef(t, uidB, Guaranteed, "containerd://"+hexID2)
	if _, err := fx.fs.MoveProcesses(gone, []int{5}); !errors.Is(err, ErrVanished) {
		t.Errorf("move into a container without a cgroup: %v, want ErrVanished", err)
	}
}
