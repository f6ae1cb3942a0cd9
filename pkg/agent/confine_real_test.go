package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/finegrain-dev/finegrain/internal/threadcaps"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/checkpoint"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/slurmtest"
)

// TestRealSlurmJobConfinedToPlaceholder runs the whole agent on this machine's cgroup v1 with a
// real Slurm whose slurmd n1 runs in a virtual cluster's slurmd container cgroup, with
// finegrain's TaskProlog and an agent reconciling once a second and confining Slurm jobs every
// 100 ms (--slurm-confine-interval, its default): a job with a placeholder
// pod, which the agent pins to one exclusive CPU, has every process (its batch slurmstepd, the
// script, a background sleep, an srun step's slurmstepd and task) moved by the agent into the
// placeholder's cgroups, where Cpus_allowed_list is the pinned CPU — already for the first
// command of the script and of the step, which the TaskProlog held until the move. A second job
// without a placeholder stays in slurmd's container on the shared pool, is reported, and is
// refused by the TaskProlog after its timeout without running its script.
func TestRealSlurmJobConfinedToPlaceholder(t *testing.T) {
	kt := newKernelTest(t, "finegrain-confine-test")
	const prologTimeout = 5 * time.Second
	s := slurmtest.StartWith(t, slurmtest.Options{TaskPrologTimeout: prologTimeout})
	procs, err := cgroup.NewProcessReader(kt.layout, "/proc")
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.New(filepath.Join(t.TempDir(), "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(1000)
	// The agent reads the processes without capabilities, as the DaemonSet runs it, and moves them
	// with CAP_SYS_NICE alone, which moving a process that holds capabilities into another cpuset
	// takes (docs/slurm.md).
	ka := kt.runEvery(Deps{Store: store, Recorder: events, Processes: procs, Mover: niceMover{kt.fs},
		SlurmProcesses: func(pids []int) (ps []slurm.Process, err error) {
			if werr := threadcaps.Without(func() error {
				ps, err = slurm.ReadProcesses("/proc", pids)
				return nil
			}); werr != nil {
				return nil, werr
			}
			return ps, err
		}}, time.Second, 100*time.Millisecond)
	a, k, m, client, resolver, ctx := ka.a, kt.tree, kt.mounts, ka.client, ka.resolver, ka.ctx

	// The virtual cluster's slurmd pod; Slurm's slurmd n1 runs in its container's cgroups.
	owner := vcOwner("vc1", vcUID, true)
	slurmd := slurmdOf("vc1-slurmd-node-a", "ns", owner)
	slurmdDir := "kubepods/burstable/pod" + string(slurmd.UID) + "/" + hexID('1')
	resolver.set(hexID('1'), cri.Identity{PodUID: string(slurmd.UID), Name: "slurmd"})
	if _, err := client.CoreV1().Pods("ns").Create(ctx, withStatus(slurmd, hexID('1')), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.mkdir("kubepods/burstable/pod" + string(slurmd.UID))
	k.mkdir(slurmdDir)
	pidFile, err := os.ReadFile(filepath.Join(s.Dir, "slurmd-n1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		if err := os.WriteFile(filepath.Join(m.Root(c), k.base, slurmdDir, "cgroup.procs"), []byte(strings.TrimSpace(string(pidFile))), 0o644); err != nil {
			t.Fatalf("move slurmd n1 (PID %s) into the slurmd container: %v", pidFile, err)
		}
	}

	// Job 1 gets a placeholder the agent pins; job 2 gets none.
	// Each first command writes what CPUs it may run on.
	placed := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "grep Cpus_allowed_list: /proc/self/status > first; sleep 7707 & "+
		"srun -n1 sh -c 'grep Cpus_allowed_list: /proc/self/status > step; exec sleep 7708' & while :; do sleep 0.1; done")
	unplaced := s.Sbatch(t, "-n", "1", "-o", "out-%j", "--wrap", "touch unplaced-ran; sleep 7709")
	ph := placeholderOf("vc1-slurm-"+placed.String()+"-0", placed, vcOwner("vc1", vcUID, false))
	phDir := "kubepods/pod" + string(ph.UID) + "/" + hexID('2')
	resolver.set(hexID('2'), cri.Identity{PodUID: string(ph.UID), Name: "placeholder"})
	if _, err := client.CoreV1().Pods("ns").Create(ctx, withStatus(ph, hexID('2')), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.mkdir("kubepods/pod" + string(ph.UID))
	k.mkdir(phDir)
	waitFor(t, func() bool { return len(a.Snapshot().Pins) == 1 })
	pin := a.Snapshot().Pins[0]
	waitFor(t, func() bool { return k.read(phDir, "cpuset.cpus") == pin.CPUs.String() })
	shared := a.Snapshot().Shared.String()
	waitFor(t, func() bool { return k.read(slurmdDir, "cpuset.cpus") == shared })

	for _, id := range []slurm.JobID{placed, unplaced} {
		if err := s.Client.Start(ctx, id, []string{"n1"}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var where map[int]string
	slurmtest.WaitFor(t, 20*time.Second, "every process of job "+placed.String()+" in its placeholder", func() bool {
		ps, jobs := s.Jobs(t)
		var titles []string
		where = map[int]string{}
		for _, p := range ps {
			if slices.Contains(jobs[placed], p.PID) {
				titles = append(titles, p.Title)
				where[p.PID] = slurmtest.CPUSetCgroup(p.PID)
			}
		}
		for _, want := range []string{"sleep 7707", "sleep 7708", "slurmstepd: [" + placed.String() + ".batch]", "slurmstepd: [" + placed.String() + ".0]"} {
			if !slices.Contains(titles, want) {
				return false
			}
		}
		for _, dir := range where {
			if dir != "" && dir != "/"+k.base+"/"+phDir {
				return false
			}
		}
		return true
	})
	t.Logf("job %s's %d processes in its placeholder %s after its start", placed, len(where), time.Since(start))
	for _, f := range []string{"first", "step"} {
		b, err := os.ReadFile(filepath.Join(s.Dir, "work", f))
		if got := strings.TrimSpace(strings.TrimPrefix(string(b), "Cpus_allowed_list:")); err != nil || got != pin.CPUs.String() {
			t.Errorf("the %s command of job %s read Cpus_allowed_list %q (%v), want the placeholder's pinned CPUs %s", f, placed, got, err, pin.CPUs)
		}
	}
	for pid := range where {
		if got := slurmtest.CPUsAllowed(pid); got != "" && got != pin.CPUs.String() {
			t.Errorf("process %d of job %s: Cpus_allowed_list %s, want the placeholder's pinned CPUs %s", pid, placed, got, pin.CPUs)
		}
		if got := memoryCgroupOf(pid); got != "" && got != "/"+k.base+"/"+phDir && !exitsSoon(pid) {
			t.Errorf("process %d of job %s: memory cgroup %s, want the placeholder's", pid, placed, got)
		}
	}

	// The job without a placeholder runs in slurmd's container, on the shared pool, reported.
	slurmtest.WaitFor(t, 10*time.Second, "job "+unplaced.String()+" reported without placeholder", func() bool {
		for {
			select {
			case ev := <-events.Events:
				if strings.Contains(ev, ReasonSlurmJobNoPlaceholder) && strings.Contains(ev, "Slurm job "+unplaced.String()+" ") {
					return true
				}
			default:
				return false
			}
		}
	})
	_, jobs := s.Jobs(t)
	left := jobs[unplaced]
	if len(left) == 0 {
		t.Fatalf("job %s has no processes", unplaced)
	}
	for _, pid := range left {
		if got := slurmtest.CPUSetCgroup(pid); got != "" && got != "/"+k.base+"/"+slurmdDir {
			t.Errorf("process %d of job %s (no placeholder) moved to %s", pid, unplaced, got)
		}
		if got := slurmtest.CPUsAllowed(pid); got != "" && got != shared {
			t.Errorf("process %d of job %s: Cpus_allowed_list %s, want the shared pool %s", pid, unplaced, got, shared)
		}
	}
	// The TaskProlog refuses it once its timeout has passed: its script never ran.
	slurmtest.WaitFor(t, prologTimeout+10*time.Second, "job "+unplaced.String()+" to end", func() bool { return s.Job(t, unplaced).Ended() })
	out, _ := os.ReadFile(filepath.Join(s.Dir, "work", "out-"+unplaced.String()))
	if j := s.Job(t, unplaced); j.State != slurm.StateFailed || !strings.Contains(string(out), "not confined to its job's placeholder within 5.0 s") {
		t.Errorf("job %+v without placeholder: want FAILED with the TaskProlog's reason in its output, got %q", j, out)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "work", "unplaced-ran")); err == nil {
		t.Errorf("job %s's script ran without a placeholder", unplaced)
	}
}

// niceMover moves processes as cgroup.FS does, on a thread whose only capability is
// CAP_SYS_NICE.
type niceMover struct{ fs *cgroup.FS }

func (m niceMover) MoveProcesses(ref cgroup.ContainerRef, pids []int) (moved []int, err error) {
	if werr := threadcaps.Only(unix.CAP_SYS_NICE, func() error {
		moved, err = m.fs.MoveProcesses(ref, pids)
		return nil
	}); werr != nil {
		return nil, werr
	}
	return moved, err
}

// memoryCgroupOf is a process's memory cgroup, "" once it has exited. A zombie's
// /proc/<pid>/cgroup names the root cgroups (its cpuset file still names its cpuset): a memory
// cgroup read as "/" counts only if the process does not exit right after (exitsSoon): an exiting
// process leaves its cgroups a moment before the kernel marks it a zombie.
func memoryCgroupOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "memory" {
			return f[2]
		}
	}
	return ""
}

// exitsSoon reports whether a process is a zombie or gone within 200 ms.
func exitsSoon(pid int) bool {
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if exited(pid) {
			return true
		}
	}
	return false
}

// exited reports whether a process is a zombie or gone.
func exited(pid int) bool {
	ps, err := slurm.ReadProcesses("/proc", []int{pid})
	return err != nil || len(ps) == 0 || ps[0].State == 'Z' || ps[0].State == 'X'
}
