package mpi

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

var hosts = []Host{
	{Name: "cg-worker-0.cg-workers.hpc.svc", Slots: 4, Port: 20000},
	{Name: "cg-worker-1.cg-workers.hpc.svc", Slots: 4, Port: 20001},
	{Name: "cg-worker-2.cg-workers.hpc.svc", Slots: 3},
}

func TestHostfileFormats(t *testing.T) {
	for _, tc := range []struct {
		impl v1alpha1.MPIImplementation
		want string
	}{
		{v1alpha1.OpenMPI, "cg-worker-0.cg-workers.hpc.svc slots=4\ncg-worker-1.cg-workers.hpc.svc slots=4\ncg-worker-2.cg-workers.hpc.svc slots=3\n"},
		{v1alpha1.MPICH, "cg-worker-0.cg-workers.hpc.svc:4\ncg-worker-1.cg-workers.hpc.svc:4\ncg-worker-2.cg-workers.hpc.svc:3\n"},
	} {
		if got := Hostfile(tc.impl, hosts); got != tc.want {
			t.Errorf("Hostfile(%s) = %q, want %q", tc.impl, got, tc.want)
		}
	}
}

// TestSSHConfigAsSSHReadsIt asks OpenSSH's own parser (ssh -G prints the configuration it would
// use for a host) what the job's configuration means for its workers and for anything else.
func TestSSHConfigAsSSHReadsIt(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed (Debian package openssh-client): cannot check the configuration with OpenSSH's parser")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, ClientConfigFile)
	if err := os.WriteFile(cfg, []byte(SSHConfig("cg-workers", "hpc", "/root/.ssh", hosts)), 0o644); err != nil {
		t.Fatal(err)
	}
	effective := func(host string) map[string]string {
		out, err := exec.Command("ssh", "-G", "-F", cfg, host).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh -G -F %s %s: %v\n%s", cfg, host, err, out)
		}
		m := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(line, " ")
			if _, seen := m[k]; !seen {
				m[k] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		host, port, strict string
	}{
		{"cg-worker-0.cg-workers.hpc.svc", "20000", "false"},
		{"cg-worker-0.cg-workers", "20000", "false"},
		{"cg-worker-1.cg-workers.hpc.svc.cluster.local", "22", "false"},
		{"cg-worker-1.cg-workers.hpc.svc", "20001", "false"},
		{"cg-worker-2.cg-workers.hpc.svc", "22", "false"},
		// Other hosts keep OpenSSH's defaults: prompts and known-hosts checks stay on.
		{"db-0.db.hpc.svc", "22", "ask"},
		{"cg-worker-0.other-workers.hpc.svc", "22", "ask"},
	} {
		m := effective(tc.host)
		if m["port"] != tc.port || m["stricthostkeychecking"] != tc.strict {
			t.Errorf("ssh %s: port %s, StrictHostKeyChecking %s; want %s, %s", tc.host, m["port"], m["stricthostkeychecking"], tc.port, tc.strict)
		}
		if tc.strict == "false" && (m["identityfile"] != "/root/.ssh/id_ed25519" || m["userknownhostsfile"] != "/dev/null" || m["batchmode"] != "yes") {
			t.Errorf("ssh %s: identityfile %q, userknownhostsfile %q, batchmode %q", tc.host, m["identityfile"], m["userknownhostsfile"], m["batchmode"])
		}
	}
}

func TestLauncherEnv(t *testing.T) {
	names := func(impl v1alpha1.MPIImplementation) map[string]string {
		m := map[string]string{}
		for _, e := range LauncherEnv(impl, "/etc/mpi/hostfile", "/home/mpi/.ssh", false) {
			m[e.Name] = e.Value
		}
		return m
	}
	ompi := names(v1alpha1.OpenMPI)
	want := map[string]string{
		EnvHostfile:                         "/etc/mpi/hostfile",
		EnvImplementation:                   "OpenMPI",
		"OMPI_MCA_orte_default_hostfile":    "/etc/mpi/hostfile",
		"OMPI_MCA_plm_rsh_args":             "-F /home/mpi/.ssh/config -o ConnectionAttempts=10",
		"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
	}
	if d := cmp.Diff(want, ompi); d != "" {
		t.Errorf("Open MPI launcher env (-want +got):\n%s", d)
	}
	mpich := names(v1alpha1.MPICH)
	want = map[string]string{
		EnvHostfile:                 "/etc/mpi/hostfile",
		EnvImplementation:           "MPICH",
		"HYDRA_HOST_FILE":           "/etc/mpi/hostfile",
		"HYDRA_LAUNCHER":            "ssh",
		"HYDRA_LAUNCHER_EXTRA_ARGS": "-F /home/mpi/.ssh/config -o ConnectionAttempts=10",
	}
	if d := cmp.Diff(want, mpich); d != "" {
		t.Errorf("MPICH launcher env (-want +got):\n%s", d)
	}
	podNet := LauncherEnv(v1alpha1.MPICH, "/etc/mpi/hostfile", "/root/.ssh", true)
	if last := podNet[len(podNet)-1]; last.Name != "HYDRA_IFACE" || last.Value != "eth0" {
		t.Errorf("MPICH on a pod network: env ends with %v, want HYDRA_IFACE=eth0", last)
	}
	for _, e := range LauncherEnv(v1alpha1.OpenMPI, "/etc/mpi/hostfile", "/root/.ssh", true) {
		if e.Name == "HYDRA_IFACE" {
			t.Errorf("Open MPI on a pod network got %v", e)
		}
	}
}

func TestWorkerEnv(t *testing.T) {
	env := WorkerEnv(v1alpha1.MPICH, "/root/.ssh", 20001)
	want := []string{EnvImplementation + "=MPICH", EnvSSHPort + "=20001", EnvSSHDir + "=/root/.ssh"}
	for i, e := range env {
		if e.Name+"="+e.Value != want[i] {
			t.Errorf("worker env %v, want %v", env, want)
		}
	}
}

func TestIdentityIsAnOpenSSHKeyPair(t *testing.T) {
	id, err := NewIdentity(rand.Reader, "finegrain HPCJob hpc/cg")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(id.PrivateKey)
	if err != nil {
		t.Fatalf("private key does not parse: %v", err)
	}
	pub, comment, _, rest, err := ssh.ParseAuthorizedKey(id.AuthorizedKey)
	if err != nil || len(rest) != 0 {
		t.Fatalf("authorized_keys line %q does not parse: %v", id.AuthorizedKey, err)
	}
	if !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) || pub.Type() != ssh.KeyAlgoED25519 || comment != "finegrain HPCJob hpc/cg" {
		t.Errorf("public key %s (%q) does not match the private key's %s", pub.Type(), comment, signer.PublicKey().Type())
	}
	other, err := NewIdentity(rand.Reader, "")
	if err != nil || bytes.Equal(other.PrivateKey, id.PrivateKey) {
		t.Errorf("two identities are the same key (err %v)", err)
	}
	if _, err := exec.LookPath("ssh-keygen"); err == nil {
		dir := t.TempDir()
		key := filepath.Join(dir, IdentityFile)
		if err := os.WriteFile(key, id.PrivateKey, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ssh-keygen", "-y", "-f", key).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen -y refuses the private key: %v\n%s", err, out)
		}
		if !strings.HasPrefix(string(id.AuthorizedKey), strings.TrimSpace(string(out))) {
			t.Errorf("ssh-keygen derives %q from the private key, authorized_keys has %q", out, id.AuthorizedKey)
		}
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{"20000-20999": {20000, 20999}, " 2222 ": {2222, 2222}, "1-65535": {1, 65535}} {
		got, err := ParsePortRange(in)
		if err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0-10", "10-5", "1-65536", "a-b", "20000-", "-5", "99999999999-1"} {
		if _, err := ParsePortRange(bad); err == nil || !strings.Contains(err.Error(), "FIRST-LAST") {
			t.Errorf("ParsePortRange(%q): error %v, want one that shows the format", bad, err)
		}
	}
}

func TestPortsFreePerNode(t *testing.T) {
	p := NewPorts(PortRange{First: 100, Last: 103})
	used := func(ports ...int32) func(int32) bool {
		return func(x int32) bool {
			for _, u := range ports {
				if u == x {
					return true
				}
			}
			return false
		}
	}
	take := func(node string, inUse func(int32) bool) int32 {
		t.Helper()
		port, err := p.Take(node, inUse)
		if err != nil {
			t.Fatalf("Take(%s): %v", node, err)
		}
		return port
	}
	got := []int32{
		take("a", used(100)), // a's pods hold 100
		take("a", used(100)), // 101 went to the first worker on a
		take("b", nil),       // b has nothing
		take("", nil),        // a worker not placed yet: a port handed out nowhere
	}
	if d := cmp.Diff([]int32{101, 102, 100, 103}, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	if _, err := p.Take("a", used(100, 103)); err == nil || !strings.Contains(err.Error(), "--ssh-port-range") {
		t.Errorf("a full range on node a: error %v, want one naming --ssh-port-range", err)
	}
}
