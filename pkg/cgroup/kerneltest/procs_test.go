package kerneltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// TestProcessesOfAPinnedContainer pins a container's real cgroup, starts two `sleep` processes
// in it (one in a sub-cgroup, as a process manager inside a container makes them), each with
// an MPI rank in its environment, and reads them back with the process reader: PIDs, name,
// sub-cgroup, rank and the allowed CPUs and memory nodes must be what the kernel enforces.
func TestProcessesOfAPinnedContainer(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			sleep, err := exec.LookPath("sleep")
			if err != nil {
				t.Skipf("needs a sleep command: %v", err)
			}
			k := newKernel(t, v, cgroup.Cgroupfs)
			w := ref(t, uidW, "Guaranteed", idW)
			k.addContainer(w)
			exclusive, _, mems := k.pools()
			k.apply(w, cgroup.Exclusive(exclusive, mems))
			sub := k.subCgroup(k.dirs(w)[0], "ranks")

			rank5 := startSleep(t, sleep, "OMPI_COMM_WORLD_RANK=5", k.dirs(w)...)
			rank6 := startSleep(t, sleep, "PMIX_RANK=6", sub)

			r, err := cgroup.NewProcessReader(k.layout, "/proc")
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Processes(w, 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []cgroup.Process{
				{PID: rank5, Command: "sleep", CPUs: exclusive, Mems: mems, Rank: cgroup.Rank{Variable: "OMPI_COMM_WORLD_RANK", Value: 5}},
				{PID: rank6, Command: "sleep", Cgroup: "ranks", CPUs: exclusive, Mems: mems, Rank: cgroup.Rank{Variable: "PMIX_RANK", Value: 6}},
			}
			if rank6 < rank5 {
				want[0], want[1] = want[1], want[0]
			}
			eq := cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })
			if d := cmp.Diff(want, got.Processes, eq); d != "" {
				t.Errorf("Processes of the pinned container (-want +got):\n%s", d)
			}
			if got.Listed != 2 || got.Truncated() {
				t.Errorf("Listed %d, Truncated %t; want 2 and false", got.Listed, got.Truncated())
			}
			for _, p := range got.Processes {
				var set unix.CPUSet
				if err := unix.SchedGetaffinity(p.PID, &set); err != nil {
					t.Fatal(err)
				}
				if set.Count() != exclusive.Size() {
					t.Errorf("process %d: sched_getaffinity has %d CPUs, the listing says %s", p.PID, set.Count(), p.CPUs)
				}
			}
		})
	}
}

// subCgroup makes a cgroup below a container's, as a process manager inside the container
// would: on v1 a cpuset that copies its parent's, on v2 a plain directory, so that the
// container's cgroup keeps no controller enabled for children and may hold processes itself.
func (k *kernel) subCgroup(parent, name string) string {
	k.t.Helper()
	dir := filepath.Join(parent, name)
	if k.version == cgroup.V1 {
		k.mkdirAll(dir)
		return dir
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() {
		if err := rmdir(dir); err != nil {
			k.t.Errorf("cleanup: %v", err)
		}
	})
	return dir
}

// startSleep starts `sleep 600` with one extra environment variable and moves it into dirs;
// the test's cleanup kills it before the cgroups are removed.
func startSleep(t *testing.T, sleep, variable string, dirs ...string) int {
	t.Helper()
	cmd := exec.Command(sleep, "600")
	cmd.Env = []string{"PATH=/usr/bin:/bin", variable}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatalf("move sleep %d into %s: %v", cmd.Process.Pid, dir, err)
		}
	}
	return cmd.Process.Pid
}
