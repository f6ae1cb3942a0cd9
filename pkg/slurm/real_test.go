package slurm

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// realSlurm is a Slurm cluster of its own on this host: munged, slurmctld and two slurmd (n1,
// n2) on free ports of 127.0.0.1, every file under one test directory, finegrain's
// job_submit.lua beside slurm.conf.
type realSlurm struct {
	dir    string
	client *Client
	runner LocalRunner
}

// startRealSlurm starts the daemons and waits until both nodes are idle; it skips the test
// where they cannot run here.
func startRealSlurm(t *testing.T) *realSlurm {
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
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=%[4]d CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, ports[0], ports[1], dir, ports[2])
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job_submit.lua"), []byte(JobSubmitLua), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &realSlurm{dir: dir, runner: LocalRunner{Env: []string{"SLURM_CONF=" + filepath.Join(dir, "slurm.conf")}}}
	s.client = &Client{Runner: s.runner}
	s.daemon(t, "munged", "munged", "-F", "-f", "--key-file="+dir+"/munge/key", "--socket="+dir+"/munge/sock",
		"--pid-file="+dir+"/munge/pid", "--log-file="+dir+"/munge/log", "--seed-file="+dir+"/munge/seed")
	waitFor(t, 10*time.Second, "munged's socket", func() bool { _, err := os.Stat(dir + "/munge/sock"); return err == nil })
	s.daemon(t, "slurmctld", "slurmctld", "-D", "-c", "-i")
	s.daemon(t, "slurmd-n1", "slurmd", "-D", "-N", "n1")
	s.daemon(t, "slurmd-n2", "slurmd", "-D", "-N", "n2")
	waitFor(t, 30*time.Second, "both slurmd idle", func() bool {
		out, err := s.runner.Run(context.Background(), []string{"sinfo", "-h", "-N", "-o", "%N %t"})
		return err == nil && strings.Count(string(out), "idle") == 2
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

// daemon starts one daemon in the foreground, its output in log/<label>.out, and stops it
// (SIGKILL) when the test ends.
func (s *realSlurm) daemon(t *testing.T, label, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), s.runner.Env...)
	out, err := os.Create(filepath.Join(s.dir, "log", label+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
	})
}

// freePorts returns n TCP ports of 127.0.0.1 that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
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

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
	}
}

// sbatch submits a batch script as root in the test's work directory and returns its job ID.
func (s *realSlurm) sbatch(t *testing.T, args ...string) JobID {
	t.Helper()
	out, err := s.runner.Run(context.Background(), append([]string{"sbatch", "--parsable", "-D", s.dir + "/work"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseJobID(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// job returns the job as Jobs lists it.
func (s *realSlurm) job(t *testing.T, id JobID) Job {
	t.Helper()
	jobs, err := s.client.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("squeue does not list job %s", id)
	return Job{}
}

// TestRealSlurmDelegation drives a real slurmctld and two slurmd with finegrain's job_submit.lua:
// a new job is held and asks for what it was submitted with; the bridge's comment shows; Start
// runs it on exactly the node given; a cancelled and a finished job read as ended; a running
// job requeued held is held again; no one but root may release a job or choose its nodes.
func TestRealSlurmDelegation(t *testing.T) {
	s := startRealSlurm(t)
	ctx := context.Background()

	// 1. Held on submission, with what it asks for.
	id := s.sbatch(t, "-N", "1", "-n", "2", "--mem=100M", "-o", "out-%j", "--wrap", "echo ran on $SLURMD_NODENAME")
	j := s.job(t, id)
	if !j.Held() || j.Reason != ReasonHeldUser || j.Nodes != 1 || j.Tasks != 2 || j.CPUs != 2 || j.MemoryPerNode != 100*MiB {
		t.Fatalf("new job %+v: want held (JobHeldUser), 1 node, 2 tasks, 2 CPUs, 100 MiB a node", j)
	}
	time.Sleep(1500 * time.Millisecond)
	if j = s.job(t, id); !j.Held() {
		t.Fatalf("job %s started on Slurm's own say: %+v", id, j)
	}

	// 2. The waiting reason shows in the comment.
	const why = "finegrain: waiting for placement: 2 CPUs on 1 node"
	if err := s.client.SetComment(ctx, id, why); err != nil {
		t.Fatal(err)
	}
	if j = s.job(t, id); j.Comment != why {
		t.Fatalf("comment %q, want %q", j.Comment, why)
	}

	// 3. Started on the node given, and ended.
	if err := s.client.Start(ctx, id, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "job "+id.String()+" to complete", func() bool { return s.job(t, id).Ended() })
	if j = s.job(t, id); j.State != StateCompleted || j.NodeList != "n2" || j.RequiredNodes != "n2" {
		t.Fatalf("job %+v: want COMPLETED on n2", j)
	}
	out, _ := os.ReadFile(fmt.Sprintf("%s/work/out-%s", s.dir, id))
	if strings.TrimSpace(string(out)) != "ran on n2" {
		t.Fatalf("job output %q, want \"ran on n2\"", out)
	}

	// 4. A running job requeued held is held again (Slurm then delays its next start: BeginTime);
	// a cancelled one reads as ended.
	requeued := s.sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	long := s.sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	for _, id := range []JobID{requeued, long} {
		if err := s.client.Start(ctx, id, []string{"n1"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "job "+id.String()+" to run", func() bool { return s.job(t, id).Active() })
	}
	if err := s.client.RequeueHold(ctx, requeued); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "job "+requeued.String()+" to be held again", func() bool { return s.job(t, requeued).Held() })
	if _, err := s.runner.Run(ctx, []string{"scancel", long.String(), requeued.String()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, 10*time.Second, "job "+long.String()+" to read as ended", func() bool { return s.job(t, long).Ended() })
	t.Logf("scancel of job %s read as ended after %v (squeue --json polled)", long, time.Since(start).Round(time.Millisecond))
	if j = s.job(t, long); j.State != StateCancelled {
		t.Fatalf("cancelled job %+v: want CANCELLED", j)
	}

	// 5. Only root releases a job or sets its nodes.
	if _, err := user.Lookup("nobody"); err != nil {
		t.Logf("no user nobody here: the lua refusals are not tried (%v)", err)
		return
	}
	theirs := s.sbatch(t, "--uid=nobody", "-o", "/dev/null", "--wrap", "true")
	for _, args := range [][]string{{"scontrol", "release", theirs.String()}, {"scontrol", "update", "JobId=" + theirs.String(), "ReqNodeList=n1"}} {
		out, err := s.runner.Run(ctx, append([]string{"runuser", "-u", "nobody", "--"}, args...))
		if err == nil || !strings.Contains(err.Error(), "Access/permission denied") {
			t.Errorf("%v as nobody: %q, %v; want Access/permission denied", args, out, err)
		}
	}
	if j = s.job(t, theirs); !j.Held() || j.RequiredNodes != "" {
		t.Fatalf("nobody's job after the refused release %+v: want held, no node list", j)
	}
	if _, err := s.runner.Run(ctx, []string{"scancel", theirs.String()}); err != nil {
		t.Fatal(err)
	}
}
