package imagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jobSSHDir makes the job's SSH directory as the placer's secret volume holds it (a key pair, the
// public key as authorized_keys, a client config) in the kubelet's layout: files are symlinks into
// a timestamped directory. It also makes a second key for the refusal check.
func jobSSHDir(t *testing.T, s *sandbox) string {
	t.Helper()
	keygen := func(name string) (string, string) {
		p := "/tmp/" + name
		s.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p)
		priv, err := os.ReadFile(filepath.Join(s.img.rootfs, p))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := os.ReadFile(filepath.Join(s.img.rootfs, p+".pub"))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(s.img.rootfs, p))
		os.Remove(filepath.Join(s.img.rootfs, p+".pub"))
		return string(priv), string(pub)
	}
	priv, pub := keygen("job")
	s.otherKey, _ = keygen("other")
	var config strings.Builder
	for _, name := range []string{"w0", "w1"} {
		fmt.Fprintf(&config, "Host %s\n  HostName 127.0.0.1\n  Port %d\n", name, workerPorts[name])
	}
	fmt.Fprintf(&config, "Host *\n  User root\n  IdentityFile %s/id_ed25519\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  BatchMode yes\n", authDir)

	dir := filepath.Join(t.TempDir(), "job-ssh")
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"id_ed25519": priv, "id_ed25519.pub": pub, "authorized_keys": pub, "config": config.String()}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(data, name), []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..data/"+name, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hpccInput is the image's example hpccinf.txt with a P×Q process grid (P×Q = ranks) and its small
// problem size, so that a run takes seconds.
func hpccInput(t *testing.T, img unpacked, p, q int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(img.rootfs, "usr/share/doc/hpcc/examples/_hpccinf.txt"))
	if err != nil {
		t.Fatalf("the image lacks HPCC's example input: %v", err)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 12 || !strings.HasSuffix(lines[10], "Ps") || !strings.HasSuffix(lines[11], "Qs") {
		t.Fatalf("HPCC's example input does not have Ps and Qs on lines 11 and 12:\n%s", data)
	}
	lines[10] = fmt.Sprintf("%-13d Ps", p)
	lines[11] = fmt.Sprintf("%-13d Qs", q)
	return strings.Join(lines, "\n")
}

// cpuList is the machine's CPUs, one by one: "0,1,2,3" for 0-3.
func cpuList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("lscpu", "--parse=CPU").Output()
	if err != nil {
		t.Fatalf("lscpu: %v", err)
	}
	var cpus []string
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			cpus = append(cpus, line)
		}
	}
	return strings.Join(cpus, ",")
}

// cpusetCgroup makes a cgroup v1 cpuset with every CPU and returns the machine's last CPU and the
// cgroup's directory; both are empty without a cgroup v1 cpuset hierarchy.
func cpusetCgroup(t *testing.T) (string, string) {
	t.Helper()
	root := "/sys/fs/cgroup/cpuset"
	cpus, err := os.ReadFile(filepath.Join(root, "cpuset.effective_cpus"))
	if err != nil {
		t.Logf("no cgroup v1 cpuset hierarchy at %s (%v): worker w1 runs without a cpuset", root, err)
		return "", ""
	}
	mems, err := os.ReadFile(filepath.Join(root, "cpuset.effective_mems"))
	if err != nil {
		t.Fatal(err)
	}
	list := strings.TrimSpace(string(cpus))
	last := list[strings.LastIndexAny(list, ",-")+1:]
	dir := filepath.Join(root, fmt.Sprintf("finegrain-mpi-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The containers' processes leave the cgroup as they die.
		deadline := time.Now().Add(10 * time.Second)
		for os.Remove(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	for file, value := range map[string]string{"cpuset.mems": strings.TrimSpace(string(mems)), "cpuset.cpus": list} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			t.Fatalf("write %s of %s: %v", file, dir, err)
		}
	}
	return last, dir
}

// summary picks key=value lines of HPCC's result summary.
func summary(result string, keys ...string) string {
	var parts []string
	for _, line := range strings.Split(result, "\n") {
		for _, k := range keys {
			if strings.HasPrefix(line, k+"=") {
				parts = append(parts, line)
			}
		}
	}
	return strings.Join(parts, " ")
}
