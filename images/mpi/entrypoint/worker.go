package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// workerPaths are where a worker writes; tests point them at a temporary directory.
type workerPaths struct {
	// StateDir receives the host key made at start and the generated sshd_config.
	StateDir string
	// PrivsepDir is sshd's privilege separation directory, which must exist before sshd starts
	// (Debian's sshd is built with /run/sshd; the image's /run is empty).
	PrivsepDir string
	// Topology receives the container's CPU topology for hwloc (topology.go).
	Topology string
}

var defaultWorkerPaths = workerPaths{
	StateDir:   "/run/finegrain-mpi/sshd",
	PrivsepDir: "/run/sshd",
	Topology:   "/run/finegrain-mpi/topology.xml",
}

const hostKeyName = "ssh_host_ed25519_key"

// startWorker prepares sshd and becomes it; it returns only when that fails.
func startWorker(cfg workerConfig, paths workerPaths) error {
	configPath, err := prepareWorker(cfg, paths)
	if err != nil {
		return err
	}
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		return fmt.Errorf("sshd is not on PATH=%s (%w): an MPI worker image needs the OpenSSH server (Debian package openssh-server)", os.Getenv("PATH"), err)
	}
	// sshd re-executes itself and so needs an absolute path; LookPath on an absolute PATH gives one.
	// It stays in the foreground (-D) as the container's process and logs to stderr (-e).
	// As PID 1 it also reaps every orphan: its SIGCHLD handler waits for any child.
	argv := []string{sshd, "-D", "-e", "-f", configPath}
	if err := syscall.Exec(sshd, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// prepareWorker checks the job's key, makes a fresh host key, writes the container's CPU topology
// and the sshd configuration; it returns the configuration's path.
func prepareWorker(cfg workerConfig, paths workerPaths) (string, error) {
	// 1. The job's public key must be there, or every MPI launch would fail later with a less
	//    helpful "Permission denied (publickey)".
	authKeys := filepath.Join(cfg.AuthDir, "authorized_keys")
	st, err := os.Stat(authKeys)
	if err != nil {
		return "", fmt.Errorf("the job's public key %s is missing (%w): mount the job's SSH secret at %s=%s (the placer does), or point %s at the directory holding authorized_keys", authKeys, err, envSSHAuthDir, cfg.AuthDir, envSSHAuthDir)
	}
	if !st.Mode().IsRegular() || st.Size() == 0 {
		return "", fmt.Errorf("the job's public key %s is empty or not a file: it must hold the job's public key, as the placer's SSH secret does", authKeys)
	}
	// 2. Directories: the state directory is private, the privilege separation directory must
	//    be root's and not writable by others.
	if err := os.MkdirAll(filepath.Dir(paths.Topology), 0o755); err != nil {
		return "", fmt.Errorf("create the directory of the CPU topology: %w", err)
	}
	if err := os.MkdirAll(paths.StateDir, 0o700); err != nil {
		return "", fmt.Errorf("create sshd state directory: %w", err)
	}
	if err := os.MkdirAll(paths.PrivsepDir, 0o755); err != nil {
		return "", fmt.Errorf("create sshd privilege separation directory: %w", err)
	}
	if err := os.Chmod(paths.PrivsepDir, 0o755); err != nil {
		return "", fmt.Errorf("set the mode of sshd's privilege separation directory: %w", err)
	}
	// 3. A host key of this container only, never one baked into the image.
	hostKey := filepath.Join(paths.StateDir, hostKeyName)
	if err := makeHostKey(hostKey); err != nil {
		return "", err
	}
	// 4. The CPUs hwloc may bind ranks to.
	topology := paths.Topology
	written, err := writeTopology(topology)
	if err != nil {
		return "", err
	}
	if !written {
		fmt.Fprintf(os.Stderr, "mpi-entrypoint: %s (Debian package hwloc-nox) is not installed: on cgroup v1 nodes MPI ranks may be bound to CPUs outside this container's cpuset\n", lstopo)
		topology = ""
	}
	// 5. The configuration.
	configPath := filepath.Join(paths.StateDir, "sshd_config")
	if err := os.WriteFile(configPath, []byte(sshdConfig(cfg, hostKey, topology)), 0o600); err != nil {
		return "", fmt.Errorf("write sshd configuration: %w", err)
	}
	return configPath, nil
}

// makeHostKey writes a new ed25519 key pair to path and path.pub, replacing any earlier one.
func makeHostKey(path string) error {
	for _, p := range []string{path, path + ".pub"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old host key: %w", err)
		}
	}
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		return fmt.Errorf("ssh-keygen is not on PATH=%s (%w): an MPI worker image needs it to make its host key (Debian package openssh-client)", os.Getenv("PATH"), err)
	}
	var out bytes.Buffer
	cmd := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make host key %s with %s: %w: %s", path, keygen, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// sshdConfig renders the worker's sshd configuration: the job's key is the only way in. With a
// topology file, sessions get the hwloc settings that make binding respect the container's cpuset.
func sshdConfig(cfg workerConfig, hostKey, topology string) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("# Written by mpi-entrypoint when this MPI worker started (images/mpi/README.md).")
	line("Port %d", cfg.Port)
	line("HostKey %s", hostKey)
	line("PidFile none")
	line("# Only the job's key: no passwords, no keyboard-interactive logins, root by key only.")
	line("PubkeyAuthentication yes")
	line("PasswordAuthentication no")
	line("KbdInteractiveAuthentication no")
	line("PermitRootLogin prohibit-password")
	line("AuthorizedKeysFile %s", filepath.Join(cfg.AuthDir, "authorized_keys"))
	line("# The key directory is a kubelet secret volume (a tmpfs of symlinks), whose owners and")
	line("# modes StrictModes would reject.")
	line("StrictModes no")
	line("UsePAM no")
	line("# MPI launchers open their daemon connections all at once; the default 10:30:100 drops")
	line("# unauthenticated connections beyond 10.")
	line("MaxStartups 1024")
	line("PrintMotd no")
	line("X11Forwarding no")
	line("AllowAgentForwarding no")
	line("AllowTcpForwarding no")
	line("# scp uses the SFTP protocol since OpenSSH 9.0.")
	line("Subsystem sftp internal-sftp")
	if topology != "" {
		line("# MPI daemons bind ranks through hwloc, which cannot see this container's cpuset on cgroup")
		line("# v1 nodes: it reads the CPUs from this file instead (/etc/ssh/sshrc refreshes it).")
		line("SetEnv HWLOC_XMLFILE=%s HWLOC_THISSYSTEM=1", topology)
	}
	return b.String()
}
