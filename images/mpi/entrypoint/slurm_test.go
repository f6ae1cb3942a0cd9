package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

func TestParseSlurmEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if _, ok, err := parseSlurmEnv(env()); ok || err != nil {
		t.Errorf("no role: ok %v err %v, want an MPI worker", ok, err)
	}
	if cfg, ok, err := parseSlurmEnv(env(layout.EnvRole, "slurmctld")); !ok || err != nil || cfg.Role != layout.RoleSlurmctld {
		t.Errorf("slurmctld: %+v %v %v", cfg, ok, err)
	}
	cfg, ok, err := parseSlurmEnv(env(layout.EnvRole, "slurmd", layout.EnvNodeName, "node-a", envSSHPort, "21002"))
	if !ok || err != nil || cfg.NodeName != "node-a" || cfg.Worker.Port != 21002 {
		t.Errorf("slurmd: %+v %v %v", cfg, ok, err)
	}
	for _, tt := range []struct {
		env  func(string) string
		want string
	}{
		{env(layout.EnvRole, "slurmdbd"), `FINEGRAIN_SLURM_ROLE="slurmdbd" names no role`},
		{env(layout.EnvRole, "slurmd"), `FINEGRAIN_SLURM_NODE_NAME="" must be the node's name`},
		{env(layout.EnvRole, "slurmd", layout.EnvNodeName, "a b"), `FINEGRAIN_SLURM_NODE_NAME="a b"`},
		{env(layout.EnvRole, "slurmd", layout.EnvNodeName, "a", envSSHPort, "0"), `FINEGRAIN_SSH_PORT="0"`},
	} {
		if _, _, err := parseSlurmEnv(tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want it to contain %q", err, tt.want)
		}
	}
}

// The munge key goes from the (root-owned) secret mount to munged's directory with mode 0400,
// owned by the munge user (here: whoever runs the test), and the daemons come in start order.
func TestPrepareSlurm(t *testing.T) {
	dir := t.TempDir()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	paths := slurmPaths{
		MungeKeySource: filepath.Join(dir, "secret", "munge.key"),
		MungeRunDir:    filepath.Join(dir, "run", "munge"),
		SpoolDirs:      []string{filepath.Join(dir, "spool", "ctld"), filepath.Join(dir, "spool", "d")},
		Worker:         workerPaths{StateDir: filepath.Join(dir, "sshd-state"), PrivsepDir: filepath.Join(dir, "privsep"), Topology: filepath.Join(dir, "topology.xml")},
	}
	if _, err := prepareSlurm(slurmConfig{Role: layout.RoleSlurmctld}, paths, me); err == nil || !strings.Contains(err.Error(), "read the virtual cluster's munge key") {
		t.Errorf("without a key: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(paths.MungeKeySource), 0o755); err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("k", 1024))
	if err := os.WriteFile(paths.MungeKeySource, key, 0o444); err != nil {
		t.Fatal(err)
	}
	daemons, err := prepareSlurm(slurmConfig{Role: layout.RoleSlurmctld}, paths, me)
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(paths.MungeRunDir, "munge.key")
	st, err := os.Stat(installed)
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("installed key %s: %v %v, want mode 0400", installed, st, err)
	}
	if got, _ := os.ReadFile(installed); string(got) != string(key) {
		t.Errorf("installed key differs from the Secret's")
	}
	for _, d := range paths.SpoolDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("spool directory: %v", err)
		}
	}
	if len(daemons) != 2 || daemons[0].Argv[0] != "munged" || daemons[0].Credential == nil || strings.Join(daemons[1].Argv, " ") != "slurmctld -D -i" {
		t.Errorf("slurmctld's daemons: %+v", daemons)
	}
	if !strings.Contains(strings.Join(daemons[0].Argv, " "), "--key-file="+installed) {
		t.Errorf("munged does not read the installed key: %v", daemons[0].Argv)
	}
	short := slurmPaths{MungeKeySource: filepath.Join(dir, "short.key"), MungeRunDir: paths.MungeRunDir}
	if err := os.WriteFile(short.MungeKeySource, []byte("kkkkkkkk"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareSlurm(slurmConfig{Role: layout.RoleSlurmctld}, short, me); err == nil || !strings.Contains(err.Error(), "has 8 bytes") {
		t.Errorf("short key: %v", err)
	}
	// A node: slurmd under its node name and the node's sshd (which needs the SSH secret).
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed here (Debian package openssh-client); the e2e test covers the node pod")
	}
	fakeLstopo(t)
	worker := workerConfig{Port: 21002, AuthDir: authDir(t, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJob vc\n")}
	daemons, err = prepareSlurm(slurmConfig{Role: layout.RoleSlurmd, NodeName: "node-a", Worker: worker}, paths, me)
	if err != nil {
		t.Fatal(err)
	}
	if len(daemons) != 3 || strings.Join(daemons[1].Argv, " ") != "slurmd -D -N node-a" || daemons[2].Argv[0] != "sshd" {
		t.Errorf("slurmd's daemons: %+v", daemons)
	}
}

// When one daemon exits, the others are stopped and its status is the pod's.
func TestSuperviseAllStopsTheOthers(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	sigs := make(chan os.Signal, 1)
	start := time.Now()
	status, err := superviseAll([]daemon{
		{Argv: []string{"sleep", "60"}},
		{Argv: []string{"sh", "-c", "tr '\\0' ' ' </proc/$$/cmdline >" + marker + "; exit 3"}},
	}, sigs, func(int) error { return nil })
	if err != nil || status != 3 {
		t.Fatalf("status %d err %v, want 3 from the daemon that exited first", status, err)
	}
	// argv[0] is the daemon's absolute path: sshd re-executes itself through it.
	if argv, err := os.ReadFile(marker); err != nil || !strings.HasPrefix(string(argv), "/") || !strings.Contains(string(argv), "sh -c ") {
		t.Errorf("the second daemon ran with argv %q (%v), want its absolute path first", argv, err)
	}
	if d := time.Since(start); d > stopGrace {
		t.Errorf("took %s: sleep was not stopped by SIGTERM", d)
	}
	// A signal reaches every daemon; SIGTERM ends them, 128+15.
	sigs <- syscall.SIGTERM
	status, err = superviseAll([]daemon{{Argv: []string{"sleep", "60"}}, {Argv: []string{"sleep", "60"}}}, sigs, func(int) error { return nil })
	if err != nil || status != 128+int(syscall.SIGTERM) {
		t.Errorf("status %d err %v, want %d", status, err, 128+int(syscall.SIGTERM))
	}
	if _, err := superviseAll([]daemon{{Argv: []string{"no-such-daemon"}}}, sigs, func(int) error { return nil }); err == nil || !strings.Contains(err.Error(), "cannot run no-such-daemon") {
		t.Errorf("missing daemon: %v", err)
	}
}
