package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// A virtual cluster's pod (docs/slurm.md) sets FINEGRAIN_SLURM_ROLE: the entrypoint then starts
// munged and, for slurmctld, slurmctld; for slurmd, slurmd and the node's sshd. It stays PID 1
// over them: it passes signals on, reaps orphans, and when one daemon ends it stops the others
// and exits with that daemon's status, so that the kubelet restarts the container whole.

// slurmConfig is what the daemons of a virtual cluster's pod are started from.
type slurmConfig struct {
	// Role is layout.RoleSlurmctld or layout.RoleSlurmd.
	Role string
	// NodeName is the node's name in Slurm (slurmd only).
	NodeName string
	// Worker is the node's sshd (slurmd only).
	Worker workerConfig
}

// parseSlurmEnv reads a virtual cluster pod's settings; ok is false when FINEGRAIN_SLURM_ROLE
// is unset, in a plain MPI worker.
func parseSlurmEnv(getenv func(string) string) (cfg slurmConfig, ok bool, err error) {
	role := getenv(layout.EnvRole)
	switch role {
	case "":
		return slurmConfig{}, false, nil
	case layout.RoleSlurmctld:
		return slurmConfig{Role: role}, true, nil
	case layout.RoleSlurmd:
		name := getenv(layout.EnvNodeName)
		if name == "" || strings.ContainsAny(name, " \t\n=,#[]") {
			return slurmConfig{}, true, fmt.Errorf("%s=%q must be the node's name in slurm.conf (a NodeName line): the placer sets it to the Kubernetes node's name", layout.EnvNodeName, name)
		}
		w, err := parseWorkerEnv(getenv)
		if err != nil {
			return slurmConfig{}, true, err
		}
		return slurmConfig{Role: role, NodeName: name, Worker: w}, true, nil
	default:
		return slurmConfig{}, true, fmt.Errorf("%s=%q names no role: set it to %s or %s, or leave it unset for an MPI worker", layout.EnvRole, role, layout.RoleSlurmctld, layout.RoleSlurmd)
	}
}

// slurmPaths are where the entrypoint reads and writes for Slurm; tests point them at a
// temporary directory.
type slurmPaths struct {
	// MungeKeySource is the virtual cluster's munge key as mounted from its Secret.
	MungeKeySource string
	// MungeRunDir receives the key munged reads, its socket, pid, seed and log.
	MungeRunDir string
	// SpoolDirs are created for the daemons (state save location, slurmd spool).
	SpoolDirs []string
	// Worker are the paths of the node's sshd.
	Worker workerPaths
}

var defaultSlurmPaths = slurmPaths{
	MungeKeySource: filepath.Join(layout.MungeKeyMountDir, layout.MungeKeySecretKey),
	MungeRunDir:    layout.MungeRunDir,
	SpoolDirs:      []string{layout.StateSaveLocation, layout.SlurmdSpoolDir},
	Worker:         defaultWorkerPaths,
}

// daemon is one process the pod runs.
type daemon struct {
	Argv []string
	// Credential runs it as another user (munged as munge).
	Credential *syscall.Credential
}

// prepareSlurm installs the munge key for munged, creates the daemons' directories and, for a
// node, the sshd configuration; it returns the daemons in the order they start. munged comes
// first: the Slurm daemons authenticate every message through its socket.
func prepareSlurm(cfg slurmConfig, paths slurmPaths, munge *user.User) ([]daemon, error) {
	uid, err1 := strconv.Atoi(munge.Uid)
	gid, err2 := strconv.Atoi(munge.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user munge has uid %q gid %q: want numbers", munge.Uid, munge.Gid)
	}
	// 1. munged refuses a key that is not its user's alone, and a secret volume is root's.
	key, err := os.ReadFile(paths.MungeKeySource)
	if err != nil {
		return nil, fmt.Errorf("read the virtual cluster's munge key (%w): the placer mounts its Secret at %s", err, filepath.Dir(paths.MungeKeySource))
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("munge key %s has %d bytes: munged wants at least 32", paths.MungeKeySource, len(key))
	}
	if err := os.MkdirAll(paths.MungeRunDir, 0o755); err != nil {
		return nil, fmt.Errorf("create munge's directory: %w", err)
	}
	keyFile := filepath.Join(paths.MungeRunDir, filepath.Base(layout.MungeKeyFile))
	_ = os.Remove(keyFile)
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		return nil, fmt.Errorf("install the munge key: %w", err)
	}
	for _, p := range []string{paths.MungeRunDir, keyFile} {
		if err := os.Lchown(p, uid, gid); err != nil {
			return nil, fmt.Errorf("give %s to user munge: %w", p, err)
		}
	}
	// 2. The daemons' state and spool directories (an emptyDir volume).
	for _, d := range paths.SpoolDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create Slurm's directory: %w", err)
		}
	}
	run := func(name string) string { return filepath.Join(paths.MungeRunDir, name) }
	daemons := []daemon{{
		Argv: []string{"munged", "--foreground", "--key-file=" + keyFile, "--socket=" + run(filepath.Base(layout.MungeSocket)),
			"--pid-file=" + run("munged.pid"), "--seed-file=" + run("munged.seed"), "--log-file=" + run("munged.log")},
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}}
	// 3. The role's daemons, in the foreground.
	if cfg.Role == layout.RoleSlurmctld {
		return append(daemons, daemon{Argv: []string{"slurmctld", "-D", "-i"}}), nil
	}
	sshdConfig, err := prepareWorker(cfg.Worker, paths.Worker)
	if err != nil {
		return nil, err
	}
	return append(daemons,
		daemon{Argv: []string{"slurmd", "-D", "-N", cfg.NodeName}},
		daemon{Argv: []string{"sshd", "-D", "-e", "-f", sshdConfig}},
	), nil
}

// runSlurm prepares and runs the pod's daemons until one ends.
func runSlurm(cfg slurmConfig) (int, error) {
	munge, err := user.Lookup("munge")
	if err != nil {
		return 1, fmt.Errorf("look up user munge (%w): a virtual cluster's image needs the Debian package munge", err)
	}
	daemons, err := prepareSlurm(cfg, defaultSlurmPaths, munge)
	if err != nil {
		return 1, err
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwardedSignals...)...)
	socket := filepath.Join(defaultSlurmPaths.MungeRunDir, filepath.Base(layout.MungeSocket))
	return superviseAll(daemons, sigs, func(started int) error {
		if started != 1 {
			return nil
		}
		return waitForFile(socket, 30*time.Second)
	})
}

// waitForFile waits until path exists: munged's socket before the Slurm daemons start.
func waitForFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("munged made no socket %s within %s: see its log in %s", path, timeout, filepath.Dir(path))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// superviseAll starts the daemons one after the other (after each, started is called with how
// many run; an error stops everything) and does PID 1's duties: signals from sigs other than
// SIGCHLD go to every daemon, and exited children are reaped. When a daemon exits, the others get
// SIGTERM, then SIGKILL after stopGrace; the result is the first daemon's exit status.
func superviseAll(daemons []daemon, sigs <-chan os.Signal, started func(int) error) (int, error) {
	pids := map[int]string{}
	stop := func() {
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	for i, d := range daemons {
		path, err := exec.LookPath(d.Argv[0])
		if err != nil {
			stop()
			return statusNotFound, fmt.Errorf("cannot run %s: %w (PATH=%s)", d.Argv[0], err, os.Getenv("PATH"))
		}
		// argv[0] absolute: sshd re-executes itself through it.
		argv := append([]string{path}, d.Argv[1:]...)
		pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2},
			Sys: &syscall.SysProcAttr{Credential: d.Credential}})
		if err != nil {
			stop()
			return statusNotExecutable, fmt.Errorf("start %s: %w", strings.Join(d.Argv, " "), err)
		}
		pids[pid] = d.Argv[0]
		if err := started(i + 1); err != nil {
			stop()
			return 1, err
		}
	}
	status, first, stopping := 0, "", time.Time{}
	for len(pids) > 0 {
		if err := reapDaemons(pids, &status, &first); err != nil {
			return 1, err
		}
		if first != "" && stopping.IsZero() {
			fmt.Fprintf(os.Stderr, "mpi-entrypoint: %s exited with status %d; stopping the other daemons\n", first, status)
			stop()
			stopping = time.Now()
		}
		if len(pids) == 0 {
			break
		}
		select {
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok && s != syscall.SIGCHLD {
				for pid := range pids {
					_ = syscall.Kill(pid, s)
				}
			}
		case <-time.After(time.Second):
			if !stopping.IsZero() && time.Since(stopping) > stopGrace {
				for pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	return status, nil
}

// stopGrace is how long the other daemons have to exit after one has.
const stopGrace = 10 * time.Second

// reapDaemons waits for every exited child without blocking, removes the daemons among them from
// pids, and records the first daemon to exit and its status.
func reapDaemons(pids map[int]string, status *int, first *string) error {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			clear(pids)
			return nil
		case err != nil:
			return fmt.Errorf("wait for child processes: %w", err)
		case pid == 0:
			return nil
		}
		name, ok := pids[pid]
		if !ok {
			continue // an orphan
		}
		delete(pids, pid)
		if *first == "" {
			*first, *status = name, exitStatus(ws)
		}
	}
}
