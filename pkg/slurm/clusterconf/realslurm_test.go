package clusterconf

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// The generated configuration runs the real Slurm 22.05 of this machine: munged, slurmctld and a
// slurmd whose NodeName line comes from this machine's topology (as the agent reads it) and
// MemTotal, with the paths of the pods moved into a temporary directory. slurmd accepts the
// line (a mismatch would leave the node drained), sinfo --json shows it idle through
// ParseNodeStates, and srun and sbatch jobs are held by the generated job_submit.lua and run once
// started as the delegation bridge starts them, each task once the generated TaskProlog sees it
// confined: the test plays the node agent too, with slurmd in a cpuset cgroup of CPU 0 (the
// shared pool) and the jobs' processes moved into one of CPU 1 (a placeholder), where the
// tasks' first command finds itself.
func TestGeneratedConfigRunsRealSlurm(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: munged and the Slurm daemons run as root here, as in the virtual cluster's pods")
	}
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "sinfo", "srun", "sbatch"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (Debian packages munge, slurmctld, slurmd, slurm-client): %v", bin, err)
		}
	}
	pool, placeholder := agentCgroups(t)
	dir := t.TempDir()
	c := Cluster{
		Name: "clusterconf-test", Namespace: "test", ControllerAddr: "127.0.0.1",
		Ports:      freePorts(t),
		Nodes:      []Node{thisNode(t)},
		Partitions: []v1alpha1.SlurmPartition{{Name: "batch"}},
	}
	files, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	// 1. The pods' paths, moved into dir.
	socket := filepath.Join(dir, "munge.socket")
	conf := strings.NewReplacer(
		layout.MungeSocket, socket,
		layout.StateSaveLocation, filepath.Join(dir, "ctld"),
		layout.SlurmdSpoolDir, filepath.Join(dir, "d"),
		"/run/slurmctld.pid", filepath.Join(dir, "slurmctld.pid"),
		layout.SlurmdPIDFile, filepath.Join(dir, "slurmd.pid"),
		layout.TaskProlog, filepath.Join(dir, layout.TaskPrologKey),
	)
	for _, name := range []string{layout.SlurmConfKey, layout.CgroupConfKey, layout.JobSubmitLuaKey, layout.TaskPrologKey} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(conf.Replace(files[name])), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"ctld", "d"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	// Every Slurm command and daemon below reads this configuration.
	t.Setenv("SLURM_CONF", filepath.Join(dir, layout.SlurmConfKey))
	// 2. The daemons, in the foreground, stopped at the end.
	start(t, "munged", "-F", "-f", "--key-file="+filepath.Join(dir, "munge.key"), "--socket="+socket,
		"--pid-file="+filepath.Join(dir, "munged.pid"), "--log-file="+filepath.Join(dir, "munged.log"), "--seed-file="+filepath.Join(dir, "munged.seed"))
	waitFor(t, 10*time.Second, "munged's socket", func() (bool, string) { _, err := os.Stat(socket); return err == nil, fmt.Sprint(err) })
	start(t, "slurmctld", "-D", "-c", "-i")
	slurmd := start(t, "slurmd", "-D", "-N", c.Nodes[0].Name)
	if err := os.WriteFile(filepath.Join(pool, "cgroup.procs"), []byte(strconv.Itoa(slurmd)), 0o644); err != nil {
		t.Fatalf("move slurmd into the shared pool's cgroup: %v", err)
	}
	confine(t, pool, placeholder)
	// 3. The node registers as configured and is idle.
	waitFor(t, 60*time.Second, "the node idle in sinfo", func() (bool, string) {
		out, err := exec.Command("sinfo", "--json").CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		states, err := ParseNodeStates(out)
		if err != nil {
			return false, err.Error()
		}
		return states[c.Nodes[0].Name] == "IDLE", fmt.Sprint(states)
	})
	// 4. Every job is held until the bridge places it; the test plays the bridge, gives each
	// held job this node and releases it, and the job runs.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bridge := &slurm.Client{Runner: slurm.LocalRunner{}}
	srun := exec.CommandContext(ctx, "srun", "-N1", "-n1", "sh", "-c", "grep Cpus_allowed_list: /proc/self/status; hostname")
	var srunOut, srunErr bytes.Buffer
	srun.Stdout, srun.Stderr = &srunOut, &srunErr
	if err := srun.Start(); err != nil {
		t.Fatal(err)
	}
	startHeld(ctx, t, bridge, c.Nodes[0].Name)
	if want := "Cpus_allowed_list:\t1\n" + mustHostname(t) + "\n"; srun.Wait() != nil || srunOut.String() != want {
		t.Fatalf("srun: %q (%s), want %q", srunOut.String(), srunErr.String(), want)
	}
	if !strings.Contains(srunErr.String(), "held state") {
		t.Errorf("srun did not say its job was held: %q", srunErr.String())
	}
	output := filepath.Join(dir, "batch.out")
	out, err := exec.CommandContext(ctx, "sbatch", "--parsable", "-o", output, "--wrap", "grep Cpus_allowed_list: /proc/self/status; echo batch ran on $(hostname)").CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id, err := slurm.ParseJobID(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if held := startHeld(ctx, t, bridge, c.Nodes[0].Name); held != id {
		t.Fatalf("started job %s, sbatch submitted %s", held, id)
	}
	waitFor(t, 30*time.Second, "the batch job completed", func() (bool, string) {
		jobs, err := bridge.Jobs(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, j := range jobs {
			if j.ID == id {
				return j.State == slurm.StateCompleted && j.ExitCode == 0, fmt.Sprintf("%+v", j)
			}
		}
		return false, fmt.Sprintf("job %s not in %+v", id, jobs)
	})
	if got, err := os.ReadFile(output); err != nil || !strings.HasPrefix(string(got), "Cpus_allowed_list:\t1\nbatch ran on ") {
		t.Errorf("batch output %q (%v)", got, err)
	}
}

// startHeld waits for the one job the generated job_submit.lua holds (pending at priority 0,
// its options copied into the admin comment) and starts it on node, as the bridge would; it
// returns the job's ID.
func startHeld(ctx context.Context, t *testing.T, bridge *slurm.Client, node string) slurm.JobID {
	t.Helper()
	var held slurm.Job
	waitFor(t, 30*time.Second, "a job held by job_submit.lua", func() (bool, string) {
		jobs, err := bridge.Jobs(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, j := range jobs {
			if j.Held() && j.AdminComment == "finegrain" {
				held = j
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", jobs)
	})
	if err := bridge.Start(ctx, held.ID, []string{node}); err != nil {
		t.Fatal(err)
	}
	return held.ID
}

// agentCgroups makes two cpuset cgroups (v1) for the test's node agent: the shared pool, CPU 0,
// and a placeholder, CPU 1. They are removed when the test ends, once empty. The test skips where
// this machine has no cgroup v1 cpuset hierarchy or fewer than two CPUs.
func agentCgroups(t *testing.T) (pool, placeholder string) {
	const cpusetRoot = "/sys/fs/cgroup/cpuset"
	cpus, err := os.ReadFile(filepath.Join(cpusetRoot, "cpuset.effective_cpus"))
	if err != nil {
		t.Skipf("the generated TaskProlog starts a task once the node agent confined it, which this test plays on a cgroup v1 cpuset hierarchy; there is none at %s: %v", cpusetRoot, err)
	}
	if set, err := cpulist.Parse(strings.TrimSpace(string(cpus))); err != nil || !set.Contains(0) || !set.Contains(1) {
		t.Skipf("the test's node agent needs CPUs 0 and 1; this machine has %q (%v)", cpus, err)
	}
	base := filepath.Join(cpusetRoot, fmt.Sprintf("finegrain-clusterconf-test-%d", os.Getpid()))
	pool, placeholder = filepath.Join(base, "pool"), filepath.Join(base, "placeholder")
	t.Cleanup(func() {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			_ = os.Remove(pool)
			_ = os.Remove(placeholder)
			if os.Remove(base) == nil {
				return
			}
		}
		t.Errorf("%s still exists 10 s after the test: a process is left in it", base)
	})
	// The parent first: a v1 cpuset child takes only CPUs and memory nodes its parent has.
	for _, c := range []struct{ dir, cpus string }{{base, "0-1"}, {pool, "0"}, {placeholder, "1"}} {
		if err := os.Mkdir(c.dir, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		for _, w := range [][2]string{{"cpuset.cpus", c.cpus}, {"cpuset.mems", "0"}} {
			if err := os.WriteFile(filepath.Join(c.dir, w[0]), []byte(w[1]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pool, placeholder
}

// confine plays the node agent until the test ends: every 200 ms, the processes of Slurm jobs
// in the pool's cgroup (slurm.JobProcesses) move into the placeholder's.
func confine(t *testing.T, pool, placeholder string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var pids []int
			for _, dir := range []string{pool, placeholder} {
				b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
			}
			procs, _ := slurm.ReadProcesses("/proc", pids)
			for _, jobPIDs := range slurm.JobProcesses(procs) {
				for _, pid := range jobPIDs {
					_ = os.WriteFile(filepath.Join(placeholder, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// thisNode is this machine as the controller describes a node: the agent's topology, MemTotal.
func thisNode(t *testing.T) Node {
	topo, err := topology.Discover("/sys")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var memKiB int64
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			memKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	sockets, cores := len(topo.Sockets), len(topo.Cores)
	threads := topo.NumCPUs() / cores
	return Node{
		Name: "clusterconf-test-node", Addr: "127.0.0.1",
		CPUs: sockets * (cores / sockets) * threads, Sockets: sockets, CoresPerSocket: cores / sockets, ThreadsPerCore: threads,
		RealMemoryMiB: memKiB / 1024,
	}
}

// freePorts finds 16 consecutive ports free on this machine, for the daemons and srun.
func freePorts(t *testing.T) v1alpha1.VirtualClusterPorts {
	for base := int32(42000); base < 60000; base += 16 {
		free := true
		for p := base; p < base+16 && free; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return v1alpha1.VirtualClusterPorts{Slurmctld: base, Slurmd: base + 1, SSH: base + 2, SrunFirst: base + 3, SrunLast: base + 15}
		}
	}
	t.Fatal("no 16 consecutive free ports between 42000 and 60000")
	return v1alpha1.VirtualClusterPorts{}
}

// start runs a daemon in the foreground until the test ends and returns its PID; its output is
// logged when the test fails.
func start(t *testing.T, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return cmd.Process.Pid
}

// waitFor polls check until it holds or timeout passes; check returns what it saw for the
// failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustHostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
