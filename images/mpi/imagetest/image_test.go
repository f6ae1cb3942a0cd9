package imagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Where the test mounts the job's SSH directory: not the default /root/.ssh, so that the runs
// prove FINEGRAIN_SSH_AUTH_DIR and the launchers' -F option are honoured.
const authDir = "/etc/finegrain/ssh"

// The ports of the two workers' sshd, as the placer gives them to workers on one node.
var workerPorts = map[string]int{"w0": 2201, "w1": 2202}

func TestMPIImage(t *testing.T) {
	archive := os.Getenv("FINEGRAIN_MPI_IMAGE")
	if archive == "" {
		t.Skip("set FINEGRAIN_MPI_IMAGE to the image archive (make images writes _output/images/mpi.tar) and run as root")
	}
	if !filepath.IsAbs(archive) {
		// go test runs in this package's directory; a relative path is the repository's.
		archive = filepath.Join("..", "..", "..", archive)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network, mount and PID namespaces, chroot, cgroups")
	}
	for _, tool := range []string{"ip", "nsenter", "unshare", "tar", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	// 1. The image, unpacked.
	began := time.Now()
	img := unpack(t, archive)
	t.Logf("unpacked %s in %.1f s", archive, time.Since(began).Seconds())
	t.Run("config", func(t *testing.T) { checkConfig(t, img) })

	// 2. Two workers, w1 pinned to one CPU once it runs.
	j := startJob(t, img)
	t.Run("workers", func(t *testing.T) { checkWorkers(t, j.workers) })

	// 3. Launchers, each a container of its own.
	t.Run("only the job's key", j.onlyJobKey)
	t.Run("hwloc sees w1's cpuset through the topology file only", j.hwlocTopology)
	t.Run("Open MPI runs hpcc", func(t *testing.T) { j.hpcc(t, "hpcc-openmpi", openMPIEnv, openMPIHosts(1, 1)) })
	t.Run("MPICH runs hpcc", func(t *testing.T) { j.hpcc(t, "hpcc-mpich", mpichEnv, mpichHosts(1, 1)) })
	t.Run("Open MPI: a rank per slot, each on a core of its worker", func(t *testing.T) {
		checkRanks(t, j.launch(t, "ranks-openmpi", openMPIEnv, openMPIHosts(2, 1), "mpirun", "/bin/sh", "-c", rankReport), j.cpu)
	})
	t.Run("MPICH: a rank per slot, each on a core of its worker", func(t *testing.T) {
		checkRanks(t, j.launch(t, "ranks-mpich", mpichEnv, mpichHosts(2, 1), "mpirun", "/bin/sh", "-c", rankReport), j.cpu)
	})
	t.Run("MPICH under MPI Operator: a bare mpirun with the operator's variables", j.operatorMPICH)
	t.Run("more slots than cores: ranks share a core", j.overload)
	t.Run("Open MPI tree spawn through a worker", func(t *testing.T) {
		// A radix of 1 makes w0's daemon start w1's: the worker's ssh uses the same -F option.
		env := append([]string{"OMPI_MCA_routed_radix=1"}, openMPIEnv...)
		if out := j.launch(t, "tree-openmpi", env, openMPIHosts(1, 1), "mpirun", "/bin/sh", "-c", rankReport); strings.Count(out, "rank=") != 2 {
			t.Errorf("want 2 ranks:\n%s", out)
		}
	})
	t.Run("launcher passes its command's exit status", func(t *testing.T) {
		c := j.s.start(t, containerSpec{name: "exit-status", args: []string{"/bin/sh", "-c", "exit 7"}}, authDir)
		if code, err := c.wait(time.Minute); err != nil || code != 7 {
			t.Errorf("exit status %d, %v; want 7; output:\n%s", code, err, c.out)
		}
	})

	// 4. What the runs left on the workers, and their end.
	t.Run("workers leave no zombies", func(t *testing.T) {
		for name, w := range j.workers {
			if z, err := w.zombies(); err != nil || len(z) > 0 {
				t.Errorf("worker %s: zombies %v, %v", name, z, err)
			}
		}
	})
	t.Run("SIGTERM stops a worker", func(t *testing.T) {
		w := j.workers["w0"]
		start := time.Now()
		if err := syscall.Kill(w.init, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if _, err := w.wait(10 * time.Second); err != nil {
			t.Fatalf("%v; output:\n%s", err, w.out)
		}
		t.Logf("worker w0 stopped %.2f s after SIGTERM", time.Since(start).Seconds())
	})
}

// The launcher environment the placer sets for each MPI.
var (
	openMPIEnv = []string{
		"FINEGRAIN_MPI_IMPLEMENTATION=OpenMPI",
		"OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
		"OMPI_MCA_plm_rsh_args=-F " + authDir + "/config -o ConnectionAttempts=10",
		"OMPI_MCA_orte_keep_fqdn_hostnames=true",
	}
	mpichEnv = []string{
		"FINEGRAIN_MPI_IMPLEMENTATION=MPICH",
		"HYDRA_HOST_FILE=/etc/mpi/hostfile",
		"HYDRA_LAUNCHER_EXTRA_ARGS=-F " + authDir + "/config -o ConnectionAttempts=10",
	}
)

// Hostfiles with the given slots on w0 and w1, in each MPI's format.
func openMPIHosts(w0, w1 int) map[string]string {
	return map[string]string{"/etc/mpi/hostfile": fmt.Sprintf("w0 slots=%d\nw1 slots=%d\n", w0, w1)}
}

func mpichHosts(w0, w1 int) map[string]string {
	return map[string]string{"/etc/mpi/hostfile": fmt.Sprintf("w0:%d\nw1:%d\n", w0, w1)}
}

// rankReport is what each rank prints: its rank, the ranks' count, the port of the worker whose
// sshd started it and the CPUs it may run on.
const rankReport = `echo "rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK} size=${OMPI_COMM_WORLD_SIZE:-$PMI_SIZE} port=${SSH_CONNECTION##* } $(grep Cpus_allowed_list /proc/self/status)"`

func checkConfig(t *testing.T, img unpacked) {
	c := img.config.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/mpi-entrypoint"}) || len(c.Cmd) != 0 || c.WorkingDir != "/root" {
		t.Errorf("entrypoint %v, cmd %v, working directory %q; want [/usr/local/bin/mpi-entrypoint], none, /root", c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	for _, want := range []string{"HOME=/root", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"} {
		if !slices.Contains(c.Env, want) {
			t.Errorf("image environment %v lacks %s", c.Env, want)
		}
	}
	if keys, _ := filepath.Glob(filepath.Join(img.rootfs, "etc/ssh/ssh_host_*")); len(keys) > 0 {
		t.Errorf("the image carries SSH host keys: %v", keys)
	}
	for _, p := range []string{"usr/local/bin/mpi-entrypoint", "usr/local/bin/mpirun", "usr/local/bin/mpiexec", "usr/local/bin/hpcc", "usr/lib/finegrain-mpi/mpich/bin/hpcc", "usr/bin/hpcc", "usr/sbin/sshd"} {
		if st, err := os.Stat(filepath.Join(img.rootfs, p)); err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("/%s is not an executable in the image: %v", p, err)
		}
	}
}

func checkWorkers(t *testing.T, workers map[string]*container) {
	keys := map[string]bool{}
	for name, w := range workers {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", w.init))
		if err != nil || strings.TrimSpace(string(comm)) != "sshd" {
			t.Errorf("worker %s: PID 1 is %q (%v), want sshd", name, comm, err)
		}
		config := w.file(t, "/run/finegrain-mpi/sshd/sshd_config")
		for _, want := range []string{fmt.Sprintf("Port %d\n", workerPorts[name]), "AuthorizedKeysFile " + authDir + "/authorized_keys\n", "SetEnv HWLOC_XMLFILE="} {
			if !strings.Contains(config, want) {
				t.Errorf("worker %s: sshd_config lacks %q:\n%s", name, want, config)
			}
		}
		keys[w.file(t, "/run/finegrain-mpi/sshd/ssh_host_ed25519_key.pub")] = true
	}
	if len(keys) != len(workers) {
		t.Error("two workers have the same host key")
	}
}

// rankLine is one line of the report each rank prints.
var rankLine = regexp.MustCompile(`rank=(\d+) size=(\d+) port=(\d+) Cpus_allowed_list:\s+(\S+)`)

// checkRanks checks the ranks of a 2+1 slot hostfile: a bare mpirun started one per slot, and each
// is bound to one CPU of its worker; w1's one CPU is its cpuset's when the test has one.
func checkRanks(t *testing.T, out, w1CPU string) {
	t.Helper()
	perPort := map[string][]string{}
	for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
		if m[2] != "3" {
			t.Errorf("rank %s sees %s ranks, want 3 (one per hostfile slot)", m[1], m[2])
		}
		perPort[m[3]] = append(perPort[m[3]], m[4])
	}
	w0, w1 := perPort[fmt.Sprint(workerPorts["w0"])], perPort[fmt.Sprint(workerPorts["w1"])]
	t.Logf("Cpus_allowed_list of the ranks on w0: %v, on w1: %v", w0, w1)
	if len(w0) != 2 || len(w1) != 1 {
		t.Fatalf("%d ranks on w0 and %d on w1, want 2 and 1:\n%s", len(w0), len(w1), out)
	}
	for _, cpus := range append(append([]string{}, w0...), w1...) {
		if strings.ContainsAny(cpus, ",-") {
			t.Errorf("a rank may run on CPUs %s, want one core", cpus)
		}
	}
	if w0[0] == w0[1] {
		t.Errorf("both ranks on w0 are bound to CPU %s", w0[0])
	}
	if w1CPU != "" && w1[0] != w1CPU {
		t.Errorf("the rank on w1 runs on CPU %s, outside w1's cpuset %s", w1[0], w1CPU)
	}
}
