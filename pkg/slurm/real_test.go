package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/internal/threadcaps"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/slurmtest"
)

// TestRealSlurmDelegation drives a real slurmctld and two slurmd with finegrain's job_submit.lua:
// a new job is held, marked as delegated, and asks for what it was submitted with; the bridge's
// comment shows; Start runs it on exactly the node given; a cancelled and a finished job read as
// ended; a running job requeued held is held again; a job's placement options reach its admin
// comment and bad ones are refused; no one but root may release a job or choose its nodes.
func TestRealSlurmDelegation(t *testing.T) {
	s := slurmtest.Start(t)
	ctx := context.Background()

	// 1. Held on submission, with what it asks for.
	id := s.Sbatch(t, "-N", "1", "-n", "2", "--mem=100M", "-o", "out-%j", "--wrap", "echo ran on $SLURMD_NODENAME")
	j := s.Job(t, id)
	if !j.Held() || !j.Delegated() || j.Reason != slurm.ReasonHeldUser || j.Nodes != 1 || j.Tasks != 2 || j.CPUs != 2 || j.MemoryPerNode != 100*slurm.MiB {
		t.Fatalf("new job %+v: want held (JobHeldUser), 1 node, 2 tasks, 2 CPUs, 100 slurm.MiB a node", j)
	}
	time.Sleep(1500 * time.Millisecond)
	if j = s.Job(t, id); !j.Held() {
		t.Fatalf("job %s started on Slurm's own say: %+v", id, j)
	}

	// 2. The waiting reason shows in the comment.
	const why = "finegrain: waiting for placement: 2 CPUs on 1 node"
	if err := s.Client.SetComment(ctx, id, why); err != nil {
		t.Fatal(err)
	}
	if j = s.Job(t, id); j.Comment != why {
		t.Fatalf("comment %q, want %q", j.Comment, why)
	}

	// 3. Started on the node given, and ended.
	if err := s.Client.Start(ctx, id, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to complete", func() bool { return s.Job(t, id).Ended() })
	if j = s.Job(t, id); j.State != slurm.StateCompleted || j.NodeList != "n2" || j.RequiredNodes != "n2" {
		t.Fatalf("job %+v: want COMPLETED on n2", j)
	}
	out, _ := os.ReadFile(fmt.Sprintf("%s/work/out-%s", s.Dir, id))
	if strings.TrimSpace(string(out)) != "ran on n2" {
		t.Fatalf("job output %q, want \"ran on n2\"", out)
	}

	// 4. A running job requeued held is held again (Slurm then delays its next start: BeginTime);
	// a cancelled one reads as ended.
	requeued := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	long := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	for _, id := range []slurm.JobID{requeued, long} {
		if err := s.Client.Start(ctx, id, []string{"n1"}); err != nil {
			t.Fatal(err)
		}
		slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to run", func() bool { return s.Job(t, id).Active() })
	}
	if err := s.Client.RequeueHold(ctx, requeued); err != nil {
		t.Fatal(err)
	}
	slurmtest.WaitFor(t, 20*time.Second, "job "+requeued.String()+" to be held again", func() bool { return s.Job(t, requeued).Held() })
	if _, err := s.Runner.Run(ctx, []string{"scancel", long.String(), requeued.String()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	slurmtest.WaitFor(t, 10*time.Second, "job "+long.String()+" to read as ended", func() bool { return s.Job(t, long).Ended() })
	t.Logf("scancel of job %s read as ended after %v (squeue --json polled)", long, time.Since(start).Round(time.Millisecond))
	if j = s.Job(t, long); j.State != slurm.StateCancelled {
		t.Fatalf("cancelled job %+v: want CANCELLED", j)
	}

	// 5. A job's placement options go from its comment into its admin comment; a bad one is
	// refused at submission, saying what is allowed.
	opts := s.Sbatch(t, "--comment", "run finegrain.placement=most-loaded finegrain.exclusive=false", "-o", "/dev/null", "--wrap", "true")
	o, err := s.Job(t, opts).Options()
	if err != nil || o.Placement != "most-loaded" || o.Exclusive == nil || *o.Exclusive {
		t.Fatalf("options of job %+v: %+v, %v; want most-loaded, not exclusive", s.Job(t, opts), o, err)
	}
	if _, err := s.Runner.Run(ctx, []string{"sbatch", "--comment", "finegrain.placement=packed", "--wrap", "true"}); err == nil ||
		!strings.Contains(err.Error(), "finegrain.placement=packed is not allowed: use finegrain.placement=least-loaded|most-loaded") {
		t.Errorf("sbatch with finegrain.placement=packed: %v, want refused with the allowed values", err)
	}

	// 6. Only root releases a job or sets its nodes.
	if _, err := user.Lookup("nobody"); err != nil {
		t.Logf("no user nobody here: the lua refusals are not tried (%v)", err)
		return
	}
	theirs := s.Sbatch(t, "--uid=nobody", "-o", "/dev/null", "--wrap", "true")
	for _, args := range [][]string{{"scontrol", "release", theirs.String()}, {"scontrol", "update", "JobId=" + theirs.String(), "ReqNodeList=n1"}} {
		out, err := s.Runner.Run(ctx, append([]string{"runuser", "-u", "nobody", "--"}, args...))
		if err == nil || !strings.Contains(err.Error(), "Access/permission denied") {
			t.Errorf("%v as nobody: %q, %v; want Access/permission denied", args, out, err)
		}
	}
	if j = s.Job(t, theirs); !j.Held() || j.RequiredNodes != "" {
		t.Fatalf("nobody's job after the refused release %+v: want held, no node list", j)
	}
	if _, err := s.Runner.Run(ctx, []string{"scancel", theirs.String()}); err != nil {
		t.Fatal(err)
	}
}

// The processes of a real running job are found from /proc (its batch slurmstepd, the script,
// a background process, the srun and its step's slurmstepd and task) by a thread without
// capabilities, like the node agent's, which may not read a slurmstepd's /proc/<pid>/exe; and
// moving them into a cpuset cgroup confines them to its CPUs: the kernel resets each moved task's
// affinity to the cgroup's CPUs, and what the script forks afterwards starts inside it. This is
// the mechanism of the confinement docs/slurm.md designs, on this host's cgroup v1
// cpuset.
func TestRealJobProcessesConfined(t *testing.T) {
	const cpusetRoot = "/sys/fs/cgroup/cpuset"
	if _, err := os.Stat(filepath.Join(cpusetRoot, "cpuset.cpus")); err != nil {
		t.Skipf("no cgroup v1 cpuset hierarchy at %s: %v", cpusetRoot, err)
	}
	s := slurmtest.Start(t)
	ctx := context.Background()
	id := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 7707 & srun -n1 sleep 7708 & while :; do sleep 0.1; done")
	if err := s.Client.Start(ctx, id, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	var mine []int
	batch := 0
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+"'s sleep 7707 and step's sleep 7708", func() bool {
		procs, jobs := s.Jobs(t)
		mine = jobs[id]
		var titles []string
		for _, p := range procs {
			if slices.Contains(mine, p.PID) {
				titles = append(titles, p.Title)
				if p.Title == "slurmstepd: ["+id.String()+".batch]" {
					batch = p.PID
				}
			}
		}
		return slices.Contains(titles, "sleep 7707") && slices.Contains(titles, "/usr/bin/sleep 7708") &&
			slices.Contains(titles, "slurmstepd: ["+id.String()+".batch]") && slices.Contains(titles, "slurmstepd: ["+id.String()+".0]")
	})
	// The program of the slurmstepd found is what such a thread may not read.
	err := threadcaps.Without(func() error {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", batch)); err == nil {
			return fmt.Errorf("a thread without capabilities read the program of slurmstepd %d (%s): the test no longer shows that the agent's view suffices", batch, exe)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	cg := filepath.Join(cpusetRoot, fmt.Sprintf("finegrain-slurm-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: this one cancels the job before the cluster stops.
	t.Cleanup(func() {
		if _, err := s.Runner.Run(ctx, []string{"scancel", id.String()}); err != nil {
			t.Error(err)
		}
		slurmtest.WaitFor(t, 10*time.Second, "the test cgroup to empty", func() bool { return os.Remove(cg) == nil })
	})
	const cpus = "1"
	for f, v := range map[string]string{"cpuset.cpus": cpus, "cpuset.mems": "0"} {
		if err := os.WriteFile(filepath.Join(cg, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range mine {
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("move process %d of job %s: %v", pid, id, err)
		}
	}
	moved := map[int]bool{}
	for _, pid := range mine {
		moved[pid] = true
		if got := slurmtest.CPUsAllowed(pid); got != "" && got != cpus {
			t.Errorf("process %d of job %s: Cpus_allowed_list %s after the move, want %s", pid, id, got, cpus)
		}
	}
	// The script's loop forks a sleep every 0.1 s: the new ones start in the cgroup.
	slurmtest.WaitFor(t, 5*time.Second, "a process the script forked after the move", func() bool {
		_, jobs := s.Jobs(t)
		for _, pid := range jobs[id] {
			if !moved[pid] && slurmtest.CPUsAllowed(pid) == cpus {
				return true
			}
		}
		return false
	})
}

// BenchmarkJobsRealSlurm is the cost of one pass of the bridge's poll on a real slurmctld with
// ten held jobs: one squeue --json and its parsing. Its time bounds how fast the bridge can learn
// that a job ended (the target: the job's CPUs back within a second).
func BenchmarkJobsRealSlurm(b *testing.B) {
	s := slurmtest.Start(b)
	for range 10 {
		s.Sbatch(b, "-n", "1", "-o", "/dev/null", "--wrap", "true")
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		jobs, err := s.Client.Jobs(ctx)
		if err != nil || len(jobs) != 10 {
			b.Fatalf("%d jobs, %v", len(jobs), err)
		}
	}
}

// TestRealTaskPrologWaitsForConfinement runs finegrain's TaskProlog (slurm.TaskProlog) under the
// real slurmstepd: a job's batch script and its srun step's task do not start while they run in
// slurmd's cpuset cgroup, and start once this test, playing a slow node agent, has moved them
// into a cpuset cgroup of one CPU, so that their first command already reads that CPU as its
// Cpus_allowed_list. A job nobody moves is refused after the timeout: its script never runs and
// its output says why.
func TestRealTaskPrologWaitsForConfinement(t *testing.T) {
	const cpusetRoot = "/sys/fs/cgroup/cpuset"
	if _, err := os.Stat(filepath.Join(cpusetRoot, "cpuset.cpus")); err != nil {
		t.Skipf("no cgroup v1 cpuset hierarchy at %s: %v", cpusetRoot, err)
	}
	const timeout = 4 * time.Second
	s := slurmtest.StartWith(t, slurmtest.Options{TaskPrologTimeout: timeout})
	ctx := context.Background()
	cg := filepath.Join(cpusetRoot, fmt.Sprintf("finegrain-prolog-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: this one runs before the cluster's, which end the jobs.
	t.Cleanup(func() {
		_, _ = s.Runner.Run(ctx, []string{"scancel", "--partition=batch"})
		slurmtest.WaitFor(t, 10*time.Second, "the test cgroup to empty", func() bool { return os.Remove(cg) == nil })
	})
	const cpus = "1"
	for f, v := range map[string]string{"cpuset.cpus": cpus, "cpuset.mems": "0"} {
		if err := os.WriteFile(filepath.Join(cg, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	work := filepath.Join(s.Dir, "work")

	// 1. Confined late: nothing of the script runs before the move.
	id := s.Sbatch(t, "-n", "1", "-o", "out-%j", "--wrap",
		"grep Cpus_allowed_list: /proc/self/status > first; srun -n1 sh -c 'grep Cpus_allowed_list: /proc/self/status > step'")
	if err := s.Client.Start(ctx, id, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+"'s batch step", func() bool {
		_, jobs := s.Jobs(t)
		return len(jobs[id]) >= 2 // slurmstepd, its task waiting in the TaskProlog
	})
	time.Sleep(timeout / 4)
	if _, err := os.Stat(filepath.Join(work, "first")); err == nil {
		t.Fatalf("job %s's script ran before its task was confined", id)
	}
	moveJob := func() {
		_, jobs := s.Jobs(t)
		for _, pid := range jobs[id] {
			if slurmtest.CPUSetCgroup(pid) == "/"+filepath.Base(cg) {
				continue
			}
			if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("move process %d of job %s: %v", pid, id, err)
			}
		}
	}
	moved := time.Now()
	moveJob()
	slurmtest.WaitFor(t, 10*time.Second, "job "+id.String()+"'s script to start", func() bool {
		_, err := os.Stat(filepath.Join(work, "first"))
		return err == nil
	})
	t.Logf("job %s's script started %v after its move", id, time.Since(moved).Round(time.Millisecond))
	// The srun step's slurmstepd and task start in slurmd's cgroup: moved at this slow agent's
	// next tick.
	time.Sleep(timeout / 4)
	if _, err := os.Stat(filepath.Join(work, "step")); err == nil {
		t.Fatalf("job %s's step ran before its task was confined", id)
	}
	moveJob()
	slurmtest.WaitFor(t, 10*time.Second, "job "+id.String()+" to complete", func() bool { return s.Job(t, id).Ended() })
	if j := s.Job(t, id); j.State != slurm.StateCompleted {
		out, _ := os.ReadFile(filepath.Join(work, "out-"+id.String()))
		t.Fatalf("job %+v: want COMPLETED; output %q", j, out)
	}
	for _, f := range []string{"first", "step"} {
		b, err := os.ReadFile(filepath.Join(work, f))
		if got := strings.TrimSpace(strings.TrimPrefix(string(b), "Cpus_allowed_list:")); err != nil || got != cpus {
			t.Errorf("job %s's %s command read Cpus_allowed_list %q (%v), want the cgroup's %s", id, f, got, err, cpus)
		}
	}

	// 2. Never confined: refused after the timeout, saying why.
	refused := s.Sbatch(t, "-n", "1", "-o", "out-%j", "--wrap", "touch ran")
	if err := s.Client.Start(ctx, refused, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	slurmtest.WaitFor(t, timeout+10*time.Second, "job "+refused.String()+" to end", func() bool { return s.Job(t, refused).Ended() })
	t.Logf("unconfined job %s ended %v after its start (timeout %v)", refused, time.Since(start).Round(time.Millisecond), timeout)
	if _, err := os.Stat(filepath.Join(work, "ran")); err == nil {
		t.Errorf("job %s's script ran although its task was never confined", refused)
	}
	out, _ := os.ReadFile(filepath.Join(work, "out-"+refused.String()))
	if j := s.Job(t, refused); j.State != slurm.StateFailed || !strings.Contains(string(out), "finegrain TaskProlog: task ") ||
		!strings.Contains(string(out), "of job "+refused.String()+" step batch on node n2: not confined to its job's placeholder within 4.0 s") {
		t.Errorf("unconfined job %+v: want FAILED with the TaskProlog's reason in its output, got %q", j, out)
	}
}
