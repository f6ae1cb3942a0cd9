package imagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// job is a test's running workers and what its launchers need.
type job struct {
	s       *sandbox
	hosts   string // /etc/hosts of every container
	workers map[string]*container
	cpu     string // w1's one CPU; empty without a cpuset hierarchy
	cg      string // w1's cpuset cgroup
}

// startJob starts workers w0 and w1 and waits for their sshd. w1 starts in a cpuset of every CPU
// and is pinned to the last one once it runs, as the agent pins a container that started before
// it could.
func startJob(t *testing.T, img unpacked) *job {
	t.Helper()
	j := &job{s: newSandbox(t, img), workers: map[string]*container{}}
	j.s.authSrc = jobSSHDir(t, j.s)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// Worker names resolve to loopback, as the names of workers on the launcher's own node do;
	// the client config sends each to its worker's port. Hydra's proxies call the launcher back
	// by its host name.
	j.hosts = fmt.Sprintf("127.0.0.1 localhost\n%s %s\n127.0.0.1 w0 w1\n", j.s.nodeIP, hostname)
	inf := hpccInput(t, img, 1, 2)
	j.cpu, j.cg = cpusetCgroup(t)
	for _, name := range []string{"w0", "w1"} {
		spec := containerSpec{
			name:  name,
			env:   []string{fmt.Sprintf("FINEGRAIN_SSH_PORT=%d", workerPorts[name]), "FINEGRAIN_SSH_AUTH_DIR=" + authDir},
			files: map[string]string{"/etc/hosts": j.hosts, "/root/hpccinf.txt": inf},
		}
		if name == "w1" {
			spec.cpuset = j.cg
		}
		j.workers[name] = j.s.start(t, spec, authDir)
	}
	for name, w := range j.workers {
		listening := fmt.Sprintf("Server listening on 0.0.0.0 port %d.", workerPorts[name])
		if !waitFor(t.Context(), 30*time.Second, func() bool { return strings.Contains(w.out.String(), listening) }) {
			t.Fatalf("worker %s: sshd not listening after 30 s; output:\n%s", name, w.out)
		}
	}
	if j.cg != "" {
		if err := os.WriteFile(filepath.Join(j.cg, "cpuset.cpus"), []byte(j.cpu), 0o644); err != nil {
			t.Fatalf("pin worker w1 to CPU %s: %v", j.cpu, err)
		}
	}
	return j
}

// run runs a launcher container with the given environment, files and command and returns its
// exit status and output.
func (j *job) run(t *testing.T, name string, env []string, files map[string]string, args ...string) (int, string) {
	t.Helper()
	all := map[string]string{"/etc/hosts": j.hosts}
	for k, v := range files {
		all[k] = v
	}
	start := time.Now()
	c := j.s.start(t, containerSpec{name: name, env: env, files: all, args: args}, authDir)
	code, err := c.wait(4 * time.Minute)
	if err != nil {
		t.Fatalf("launcher %s: %v; output:\n%s", name, err, c.out)
	}
	t.Logf("launcher %s: %s exited %d after %.1f s", name, strings.Join(args, " "), code, time.Since(start).Seconds())
	return code, c.out.String()
}

// launch is run for a command that must succeed.
func (j *job) launch(t *testing.T, name string, env []string, files map[string]string, args ...string) string {
	t.Helper()
	code, out := j.run(t, name, env, files, args...)
	if code != 0 {
		t.Fatalf("launcher %s: exit %d; output:\n%s", name, code, out)
	}
	return out
}

// operatorMPICH runs a launcher as MPI Operator v0.7.0 makes one for an MPIJob with
// mpiImplementation MPICH: K_MPI_JOB_ROLE=launcher, the hostfile in HYDRA_HOST_FILE, its ssh
// options in HYDRA_LAUNCH_EXTRA_ARGS (a name mpiexec.hydra does not read), no
// FINEGRAIN_MPI_IMPLEMENTATION and no ssh client configuration. Only here do the options also name
// w1's port and the job's key: the operator's workers listen on port 22 and its key is
// ~/.ssh/id_rsa, which ssh finds by itself. A bare mpirun must start MPICH, reach w1 through sshd
// although w1's host key is new, and bind the rank to w1's CPU.
func (j *job) operatorMPICH(t *testing.T) {
	env := []string{
		"K_MPI_JOB_ROLE=launcher",
		"HYDRA_HOST_FILE=/etc/mpi/hostfile",
		fmt.Sprintf("HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10 -p %d -l root -i %s/id_ed25519", workerPorts["w1"], authDir),
	}
	out := j.launch(t, "operator-mpich", env, map[string]string{"/etc/mpi/hostfile": "w1:1\n"}, "mpirun", "/bin/sh", "-c", rankReport)
	ranks := rankLine.FindAllStringSubmatch(out, -1)
	if len(ranks) != 1 || ranks[0][2] != "1" || ranks[0][3] != fmt.Sprint(workerPorts["w1"]) {
		t.Fatalf("want one rank of one, started by w1's sshd (port %d):\n%s", workerPorts["w1"], out)
	}
	if cpus := ranks[0][4]; j.cpu != "" && cpus != j.cpu {
		t.Errorf("the rank on w1 may run on CPUs %s, want w1's cpuset %s", cpus, j.cpu)
	}
	if strings.Contains(out, "Warning") {
		t.Errorf("ssh warned in the launcher's output:\n%s", out)
	}
}

// overload starts two ranks on w1, which has one CPU: they share it. Open MPI's plain core
// policy, which the image's configuration qualifies, refuses such a job.
func (j *job) overload(t *testing.T) {
	if j.cg == "" {
		t.Skip("no cgroup v1 cpuset hierarchy")
	}
	onlyW1 := map[string]map[string]string{
		"OpenMPI": {"/etc/mpi/hostfile": "w1 slots=2\n"},
		"MPICH":   {"/etc/mpi/hostfile": "w1:2\n"},
	}
	for mpi, env := range map[string][]string{"OpenMPI": openMPIEnv, "MPICH": mpichEnv} {
		out := j.launch(t, "overload-"+mpi, env, onlyW1[mpi], "mpirun", "/bin/sh", "-c", rankReport)
		if got := strings.Count(out, "Cpus_allowed_list:\t"+j.cpu+"\n"); got != 2 {
			t.Errorf("%s: %d of 2 ranks on w1's CPU %s:\n%s", mpi, got, j.cpu, out)
		}
	}
	plain := append([]string{"OMPI_MCA_hwloc_base_binding_policy=core"}, openMPIEnv...)
	code, out := j.run(t, "overload-plain-core", plain, onlyW1["OpenMPI"], "mpirun", "true")
	if code == 0 {
		t.Errorf("Open MPI's binding policy core without overload-allowed started 2 ranks on 1 core:\n%s", out)
	}
	t.Logf("Open MPI with binding policy core, 2 ranks on 1 core:\n%s", out)
}

// onlyJobKey: the job's key reaches a worker; another key and a login without key do not, and
// sshd offers nothing but public keys.
func (j *job) onlyJobKey(t *testing.T) {
	out := j.launch(t, "ssh-keys", nil, map[string]string{"/root/other": j.s.otherKey},
		"/bin/sh", "-c", `chmod 600 /root/other
ssh -F `+authDir+`/config w1 'echo "pid 1 is $(cat /proc/1/comm)"'
opts="-p 2201 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
if ssh $opts -i /root/other -o IdentitiesOnly=yes root@127.0.0.1 true 2>&1; then echo "ANOTHER KEY GOT IN"; fi
if ssh $opts -o PubkeyAuthentication=no root@127.0.0.1 true 2>&1; then echo "A LOGIN WITHOUT KEY GOT IN"; fi`)
	if !strings.Contains(out, "pid 1 is sshd") {
		t.Errorf("the job's key did not reach worker w1's sshd:\n%s", out)
	}
	if strings.Contains(out, "GOT IN") || strings.Count(out, "Permission denied (publickey)") != 2 {
		t.Errorf("sshd let in something other than the job's key, or offered more than publickey:\n%s", out)
	}
}

// hwlocTopology: in an ssh session on w1, hwloc sees w1's one CPU, and without the topology file
// the whole machine (the cgroup v1 blind spot the file works around).
func (j *job) hwlocTopology(t *testing.T) {
	if j.cg == "" {
		t.Skip("no cgroup v1 cpuset hierarchy")
	}
	count := "hwloc-calc --number-of pu machine:0"
	out := j.launch(t, "hwloc", nil, nil, "ssh", "-F", authDir+"/config", "w1",
		count+"; env -u HWLOC_XMLFILE -u HWLOC_THISSYSTEM "+count+" 2>/dev/null")
	all := strings.Count(cpuList(t), ",") + 1
	if want := fmt.Sprintf("1\n%d\n", all); out != want {
		t.Errorf("PUs hwloc sees on w1 with and without its topology file: %q, want %q", out, want)
	}
}

// hpcc runs `mpirun hpcc` on one rank per worker and checks HPCC's verdict in w0's hpccoutf.txt.
func (j *job) hpcc(t *testing.T, name string, env []string, hostfile map[string]string) {
	out := j.launch(t, name, env, hostfile, "mpirun", "hpcc")
	w0 := j.workers["w0"]
	result := w0.file(t, "/root/hpccoutf.txt")
	if err := os.Remove(fmt.Sprintf("/proc/%d/root/root/hpccoutf.txt", w0.init)); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"CommWorldProcs=2", "Success=1"} {
		if !strings.Contains(result, want) {
			t.Errorf("hpccoutf.txt on w0 lacks %s; launcher output:\n%s\nhpccoutf.txt:\n%s", want, out, result)
		}
	}
	t.Logf("%s: %s", name, summary(result, "HPL_Tflops", "StarDGEMM_Gflops", "MPIRandomAccess_GUPs", "Success"))
}
