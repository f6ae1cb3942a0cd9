// Package slurmtest starts a real Slurm of its own for a test: munged, slurmctld and two slurmd
// (nodes n1 and n2, two CPUs and 1000 MiB each) on free ports of 127.0.0.1, every file under one
// temporary directory, finegrain's job_submit.lua beside slurm.conf. It skips the test where the
// daemons cannot run (not root, Debian's Slurm 22.05 and munge packages not installed).
package slurmtest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// Cluster is a running Slurm of a test.
type Cluster struct {
	// Dir holds its files; Dir/work is a directory every user may write, where Sbatch runs jobs.
	Dir    string
	Client *slurm.Client
	Runner slurm.LocalRunner
	ctld   *daemon
}

// Options change a test's Slurm.
type Options struct {
	// TaskPrologTimeout, when positive, makes finegrain's TaskProlog (slurm.TaskProlog, with this
	// timeout) the cluster's TaskProlog: each task waits until it no longer runs in its slurmd's
	// cpuset cgroup and CPUs.
	TaskPrologTimeout time.Duration
}

// Start starts the daemons and waits until both nodes are idle; they are killed when the test
// ends (their logs printed if it failed).
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a Slurm as Start does, changed by o.
func StartWith(t testing.TB, o Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a real Slurm needs root (munged and slurmd as root); run the test as root")
	}
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "squeue", "scontrol", "sbatch", "scancel", "sinfo"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed: apt-get install slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge", bin)
		}
	}
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// munged wants its socket's directory searchable by everyone.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"munge", "state", "spool", "log", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "work"), 0o777); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 128)
	_, _ = rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge", "key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	// Job IDs start at a random number: the Slurms of tests running at the same time (go test runs
	// packages in parallel) then never share a job ID, by which their jobs' processes on this host
	// are told apart (Jobs, killStrayJobs).
	var r [4]byte
	_, _ = rand.Read(r[:])
	firstJob := 1000 + binary.BigEndian.Uint32(r[:])%60_000_000
	conf := fmt.Sprintf(`ClusterName=fgtest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmctldPort=%d
SlurmdPort=%d
AuthType=auth/munge
AuthInfo=socket=%[3]s/munge/sock
CredType=cred/munge
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool/%%n
SlurmctldPidFile=%[3]s/slurmctld.pid
SlurmdPidFile=%[3]s/slurmd-%%n.pid
SlurmctldLogFile=%[3]s/log/slurmctld.log
SlurmdLogFile=%[3]s/log/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=64
JobSubmitPlugins=lua
JobRequeue=0
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=%[4]d CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
FirstJobId=%[5]d
`, ports[0], ports[1], dir, ports[2], firstJob)
	if err := os.WriteFile(filepath.Join(dir, "job_submit.lua"), []byte(slurm.JobSubmitLua), 0o644); err != nil {
		t.Fatal(err)
	}
	if o.TaskPrologTimeout > 0 {
		prolog, err := slurm.TaskProlog(dir+"/slurmd-%n.pid", o.TaskPrologTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "task_prolog"), []byte(prolog), 0o755); err != nil {
			t.Fatal(err)
		}
		conf += "TaskProlog=" + filepath.Join(dir, "task_prolog") + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Cluster{Dir: dir, Runner: slurm.LocalRunner{Env: []string{"SLURM_CONF=" + filepath.Join(dir, "slurm.conf")}}}
	s.Client = &slurm.Client{Runner: s.Runner}
	// A job slurmctld forgot (killed before it saved its state) is not cancelled by scancel, and
	// its slurmstepd outlives slurmd: once the daemons are gone (cleanups run last-registered
	// first), what runs below a slurmstepd working in this cluster's directory is killed.
	t.Cleanup(func() { s.killStrayJobs(t) })
	s.daemon(t, "munged", "munged", "-F", "-f", "--key-file="+dir+"/munge/key", "--socket="+dir+"/munge/sock",
		"--pid-file="+dir+"/munge/pid", "--log-file="+dir+"/munge/log", "--seed-file="+dir+"/munge/seed")
	WaitFor(t, 10*time.Second, "munged's socket", func() bool { _, err := os.Stat(dir + "/munge/sock"); return err == nil })
	s.ctld = s.daemon(t, "slurmctld", "slurmctld", "-D", "-c", "-i")
	s.daemon(t, "slurmd-n1", "slurmd", "-D", "-N", "n1")
	s.daemon(t, "slurmd-n2", "slurmd", "-D", "-N", "n2")
	WaitFor(t, 30*time.Second, "both slurmd idle", func() bool {
		out, err := s.Runner.Run(context.Background(), []string{"sinfo", "-h", "-N", "-o", "%N %t"})
		return err == nil && strings.Count(string(out), "idle") == 2
	})
	// Before the daemons go, end every job: a slurmstepd outlives a killed slurmd.
	t.Cleanup(func() {
		_, _ = s.Runner.Run(context.Background(), []string{"scancel", "--partition=batch"})
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			out, err := s.Runner.Run(context.Background(), []string{"squeue", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING,SUSPENDED"})
			if err != nil || len(strings.TrimSpace(string(out))) == 0 {
				return
			}
		}
		t.Errorf("jobs of the test's Slurm still run 10 s after scancel; their processes may be left behind")
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"slurmctld.log", "slurmd-n1.log", "slurmd-n2.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, "log", f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	return s
}

// daemon is one running daemon of the cluster.
type daemon struct {
	cmd *exec.Cmd
	out *os.File
}

// daemon starts one daemon in the foreground, its output in log/<label>.out, and stops it
// (SIGKILL) when the test ends, or the daemon that replaced it (RestartController).
func (s *Cluster) daemon(t testing.TB, label, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{}
	s.start(t, d, label, name, args...)
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		d.out.Close()
	})
	return d
}

func (s *Cluster) start(t testing.TB, d *daemon, label, name string, args ...string) {
	t.Helper()
	d.cmd = exec.Command(name, args...)
	d.cmd.Env = append(os.Environ(), s.Runner.Env...)
	out, err := os.OpenFile(filepath.Join(s.Dir, "log", label+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d.out = out
	d.cmd.Stdout, d.cmd.Stderr = out, out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
}

// RestartController kills slurmctld with SIGKILL and starts it again on its saved state, as a
// crash and a restart of the slurmctld pod would; it returns once the controller answers and both
// slurmd have registered again.
func (s *Cluster) RestartController(t testing.TB) {
	t.Helper()
	_ = s.ctld.cmd.Process.Kill()
	_ = s.ctld.cmd.Wait()
	s.ctld.out.Close()
	s.start(t, s.ctld, "slurmctld", "slurmctld", "-D")
	WaitFor(t, 30*time.Second, "slurmctld to answer again", func() bool {
		_, err := s.Runner.Run(context.Background(), []string{"scontrol", "ping"})
		return err == nil
	})
	// The slurmd register again when told to reconfigure (else at slurmctld's next ping of them).
	if _, err := s.Runner.Run(context.Background(), []string{"scontrol", "reconfigure"}); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 30*time.Second, "both slurmd to respond again", func() bool {
		out, err := s.Runner.Run(context.Background(), []string{"sinfo", "-h", "-N", "-o", "%t"})
		return err == nil && len(strings.Fields(string(out))) == 2 && !strings.ContainsAny(string(out), "*~#") && !strings.Contains(string(out), "unk")
	})
}

// freePorts returns n TCP ports of 127.0.0.1 that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// WaitFor polls ok every 20 ms until it holds, failing the test after limit.
func WaitFor(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
	}
}

// Sbatch submits a batch script as root in Dir/work and returns its job ID.
func (s *Cluster) Sbatch(t testing.TB, args ...string) slurm.JobID {
	t.Helper()
	out, err := s.Runner.Run(context.Background(), append([]string{"sbatch", "--parsable", "-D", s.Dir + "/work"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	id, err := slurm.ParseJobID(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Job returns the job as squeue lists it.
func (s *Cluster) Job(t testing.TB, id slurm.JobID) slurm.Job {
	t.Helper()
	jobs, err := s.Client.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("squeue does not list job %s", id)
	return slurm.Job{}
}

// killStrayJobs kills, with SIGKILL, the processes of every job of this cluster still running.
func (s *Cluster) killStrayJobs(t testing.TB) {
	_, jobs := s.Jobs(t)
	for id, jobPIDs := range jobs {
		t.Logf("killing the processes %v of job %s, which this test's Slurm forgot", jobPIDs, id)
		for _, pid := range jobPIDs {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Jobs reads the host's processes and which of this cluster's Slurm jobs each runs for, the
// reading done on a thread without capabilities as the node agent does (jobsWithoutCapabilities).
// Jobs of other Slurms (another test's, running at the same time, whose job IDs start at 1 too)
// are left out: a job is this cluster's when one of its processes works below Dir.
func (s *Cluster) Jobs(t testing.TB) ([]slurm.Process, map[slurm.JobID][]int) {
	t.Helper()
	procs, jobs := jobsWithoutCapabilities(t)
	for id, pids := range jobs {
		ours := slices.ContainsFunc(pids, func(pid int) bool {
			cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
			return err == nil && strings.HasPrefix(cwd, s.Dir+"/")
		})
		if !ours {
			delete(jobs, id)
		}
	}
	return procs, jobs
}
