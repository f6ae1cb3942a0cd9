package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Exit statuses of a command that could not run, as shells report them.
const (
	statusNotExecutable = 126
	statusNotFound      = 127
)

// forwardedSignals are the signals that PID 1 passes on to the command: those a container
// runtime (SIGTERM on pod deletion) or a terminal sends. SIGKILL and SIGSTOP cannot be caught.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// runCommand runs the launcher's command (or any other command given to the image) with the
// environment env. When this process is not the container's PID 1, something else reaps orphans
// and delivers signals, so it simply becomes the command. As PID 1 it stays: the kernel drops
// SIGTERM to a PID 1 that has no handler for it (a plain `sh -c` launcher would then ignore pod
// deletion until SIGKILL), and orphans of the command would stay zombies; see supervise.
func runCommand(args, env []string) (int, error) {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return statusNotFound, fmt.Errorf("cannot run %q: %w (PATH=%s)", args[0], err, os.Getenv("PATH"))
	}
	if os.Getpid() != 1 {
		err := syscall.Exec(path, args, env)
		return statusNotExecutable, fmt.Errorf("exec %s: %w", path, err)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwardedSignals...)...)
	res, err := supervise(path, args, env, sigs)
	return res.Status, err
}

// supervision is the outcome of supervise.
type supervision struct {
	// Status is the command's exit status; 128+N when signal N ended it, as a shell reports it.
	Status int
	// Orphans counts the other processes reaped: descendants of the command whose parent died
	// before them.
	Orphans int
}

// supervise starts the command and does PID 1's duties until it exits: every signal from sigs
// other than SIGCHLD goes to the command, and each SIGCHLD reaps all exited children, the command
// and orphans alike. sigs must be subscribed to SIGCHLD and the forwarded signals before the call.
// Processes still running when the command has exited die with the container.
func supervise(path string, argv, env []string, sigs <-chan os.Signal) (supervision, error) {
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return supervision{Status: statusNotExecutable}, fmt.Errorf("start %s: %w", path, err)
	}
	var res supervision
	for {
		done, err := reap(pid, &res)
		if err != nil || done {
			return res, err
		}
		sig, ok := (<-sigs).(syscall.Signal)
		if !ok || sig == syscall.SIGCHLD {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return res, fmt.Errorf("forward %v to %s (pid %d): %w", sig, path, pid, err)
		}
	}
}

// reap waits for every exited child without blocking and reports whether the command (pid cmd)
// was one of them.
func reap(cmd int, res *supervision) (bool, error) {
	done := false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD) && !done:
			return false, fmt.Errorf("the command (pid %d) is no longer a child of this process", cmd)
		case errors.Is(err, syscall.ECHILD):
			return true, nil
		case err != nil:
			return done, fmt.Errorf("wait for child processes: %w", err)
		case pid == 0:
			return done, nil
		case pid == cmd:
			done = true
			res.Status = exitStatus(ws)
		default:
			res.Orphans++
		}
	}
}

func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
