package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSSHDConfig(t *testing.T) {
	cfg := workerConfig{Port: 2222, AuthDir: "/etc/finegrain/ssh"}
	got := sshdConfig(cfg, "/run/finegrain-mpi/sshd/ssh_host_ed25519_key", "")
	want := `# Written by mpi-entrypoint when this MPI worker started (images/mpi/README.md).
Port 2222
HostKey /run/finegrain-mpi/sshd/ssh_host_ed25519_key
PidFile none
# Only the job's key: no passwords, no keyboard-interactive logins, root by key only.
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AuthorizedKeysFile /etc/finegrain/ssh/authorized_keys
# The key directory is a kubelet secret volume (a tmpfs of symlinks), whose owners and
# modes StrictModes would reject.
StrictModes no
UsePAM no
# MPI launchers open their daemon connections all at once; the default 10:30:100 drops
# unauthenticated connections beyond 10.
MaxStartups 1024
PrintMotd no
X11Forwarding no
AllowAgentForwarding no
AllowTcpForwarding no
# scp uses the SFTP protocol since OpenSSH 9.0.
Subsystem sftp internal-sftp
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sshd_config (-want +got):\n%s", diff)
	}

	withTopology := sshdConfig(cfg, "/run/finegrain-mpi/sshd/ssh_host_ed25519_key", "/run/finegrain-mpi/topology.xml")
	wantTail := `# MPI daemons bind ranks through hwloc, which cannot see this container's cpuset on cgroup
# v1 nodes: it reads the CPUs from this file instead (/etc/ssh/sshrc refreshes it).
SetEnv HWLOC_XMLFILE=/run/finegrain-mpi/topology.xml HWLOC_THISSYSTEM=1
`
	if diff := cmp.Diff(want+wantTail, withTopology); diff != "" {
		t.Errorf("sshd_config with a topology (-want +got):\n%s", diff)
	}
}

// fakeLstopo puts an lstopo-no-graphics on PATH that records its arguments and environment in
// log and writes a topology to the file given with -f.
func fakeLstopo(t *testing.T) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls")
	script := `#!/bin/sh
{ echo "args: $*"; env; } >` + log + `
while [ $# -gt 1 ]; do shift; done
echo '<topology/>' >"$1"
`
	if err := os.WriteFile(filepath.Join(dir, "lstopo-no-graphics"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// authDir makes a key directory like the placer's secret volume: authorized_keys is a symlink
// into a timestamped directory, as the kubelet writes secrets.
func authDir(t *testing.T, keys string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "authorized_keys"), []byte(keys), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/authorized_keys", filepath.Join(dir, "authorized_keys")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPrepareWorker(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed here (Debian package openssh-client); the image test covers the worker")
	}
	calls := fakeLstopo(t)
	// A topology file set in the container's environment must not feed the new one.
	t.Setenv("HWLOC_XMLFILE", "/stale.xml")
	run := t.TempDir()
	paths := workerPaths{
		StateDir:   filepath.Join(run, "finegrain-mpi", "sshd"),
		PrivsepDir: filepath.Join(run, "sshd"),
		Topology:   filepath.Join(run, "finegrain-mpi", "topology.xml"),
	}
	cfg := workerConfig{Port: 2201, AuthDir: authDir(t, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJob job\n")}

	configPath, err := prepareWorker(cfg, paths)
	if err != nil {
		t.Fatalf("prepareWorker: %v", err)
	}
	config, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	hostKey := filepath.Join(paths.StateDir, "ssh_host_ed25519_key")
	if want := sshdConfig(cfg, hostKey, paths.Topology); string(config) != want {
		t.Errorf("written configuration differs from sshdConfig:\n%s", config)
	}
	if topo, err := os.ReadFile(paths.Topology); err != nil || string(topo) != "<topology/>\n" {
		t.Errorf("topology file = %q, %v; want what lstopo wrote", topo, err)
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "args: --restrict binding --of xml -f "+paths.Topology+".tmp\n") || strings.Contains(string(log), "HWLOC_XMLFILE") {
		t.Errorf("lstopo was not asked for this process's CPUs into a temporary file, or saw HWLOC_XMLFILE:\n%s", log)
	}
	first, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatalf("host key: %v", err)
	}
	if !strings.HasPrefix(string(first), "ssh-ed25519 ") {
		t.Errorf("host public key = %q, want an ed25519 key", first)
	}
	modes := map[string]os.FileMode{paths.StateDir: 0o700, filepath.Dir(paths.Topology): 0o755, paths.PrivsepDir: 0o755, hostKey: 0o600, configPath: 0o600}
	for p, want := range modes {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %o, want %o", p, got, want)
		}
	}

	// A restarted container makes a new host key over the old one.
	if _, err := prepareWorker(cfg, paths); err != nil {
		t.Fatalf("second prepareWorker: %v", err)
	}
	second, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if string(first) == string(second) {
		t.Error("the second start kept the first host key")
	}
}

func TestPrepareWorkerWithoutHwloc(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen is not installed here (Debian package openssh-client); the image test covers the worker")
	}
	// A PATH with ssh-keygen and no lstopo: the worker starts, without the hwloc settings.
	dir := t.TempDir()
	if err := os.Symlink(keygen, filepath.Join(dir, "ssh-keygen")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	run := t.TempDir()
	paths := workerPaths{StateDir: filepath.Join(run, "state"), PrivsepDir: filepath.Join(run, "sshd"), Topology: filepath.Join(run, "topology.xml")}
	configPath, err := prepareWorker(workerConfig{Port: 22, AuthDir: authDir(t, "ssh-ed25519 AAAA job\n")}, paths)
	if err != nil {
		t.Fatalf("prepareWorker: %v", err)
	}
	config, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(config), "HWLOC") {
		t.Errorf("without lstopo the configuration still points hwloc at a topology file:\n%s", config)
	}
}

func TestPrepareWorkerNeedsTheJobKey(t *testing.T) {
	run := t.TempDir()
	paths := workerPaths{StateDir: filepath.Join(run, "state"), PrivsepDir: filepath.Join(run, "sshd"), Topology: filepath.Join(run, "topology.xml")}
	cases := []struct {
		name  string
		dir   string
		wants string
	}{
		{"no authorized_keys", t.TempDir(), "mount the job's SSH secret at FINEGRAIN_SSH_AUTH_DIR="},
		{"empty authorized_keys", authDir(t, ""), "is empty or not a file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepareWorker(workerConfig{Port: 22, AuthDir: tc.dir}, paths)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("prepareWorker error = %v, want one containing %q", err, tc.wants)
			}
		})
	}
	if _, err := os.Stat(paths.StateDir); !os.IsNotExist(err) {
		t.Errorf("a worker without the job's key wrote its state directory: %v", err)
	}
}
