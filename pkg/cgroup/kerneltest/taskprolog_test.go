package kerneltest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// TestTaskPrologWaitsForTheMove runs finegrain's TaskProlog (slurm.TaskProlog) as slurmstepd
// does, from the task it starts: a shell in a shared container's cgroups that runs the prolog and,
// once it has exited 0, its first command, which prints its Cpus_allowed_list. Beside it, a
// "slurmd" (a sleep in the same cgroups) is the process the PID file names. The first command
// does not run while the task stays there; once MoveProcesses has moved the task into a pinned
// container it runs, on the pinned CPUs. A task never moved is refused after the timeout, saying
// why. On v1 the prolog reads the cpuset line of /proc/<pid>/cgroup, on v2 the unified one.
func TestTaskPrologWaitsForTheMove(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			k, sleep, src, dst, exclusive := moveSetup(t, v)
			slurmd := startSleep(t, sleep, "X=slurmd", k.dirs(src)...)
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "slurmd.pid")
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(slurmd)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			const timeout = 2 * time.Second
			script, err := slurm.TaskProlog(pidFile, timeout)
			if err != nil {
				t.Fatal(err)
			}
			prolog := filepath.Join(dir, "task_prolog")
			if err := os.WriteFile(prolog, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}

			moved := startTask(t, prolog, k.dirs(src))
			time.Sleep(timeout / 4)
			if out := moved.output(); out != "" {
				t.Fatalf("the task's first command ran before its move: %q", out)
			}
			var pids []int
			for _, f := range strings.Fields(k.read(k.dirs(src)[0], "cgroup.procs")) {
				if pid, err := strconv.Atoi(f); err == nil && pid != slurmd {
					pids = append(pids, pid)
				}
			}
			if _, err := k.fs.MoveProcesses(dst, pids); err != nil {
				t.Fatal(err)
			}
			if err := moved.wait(); err != nil {
				t.Fatalf("the moved task: %v (output %q)", err, moved.output())
			}
			if got, want := moved.output(), "Cpus_allowed_list:\t"+exclusive.String()+"\n"; got != want {
				t.Errorf("the moved task's first command printed %q, want %q (the pinned CPUs)", got, want)
			}

			refused := startTask(t, prolog, k.dirs(src))
			var exit *exec.ExitError
			if err := refused.wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 ||
				!strings.HasPrefix(refused.output(), "print finegrain TaskProlog: task ") ||
				!strings.Contains(refused.output(), "not confined to its job's placeholder within 2.0 s") {
				t.Errorf("the task never moved: %v, output %q; want exit status 1 and the reason", err, refused.output())
			}
		})
	}
}

// task is a shell started as slurmstepd starts a task: it runs the prolog, then, if the prolog
// exited 0, its first command.
type task struct {
	cmd *exec.Cmd
	out string
}

// startTask starts a task in the cgroup directories dirs: the shell waits for a line on its
// standard input until it is in them, so that the prolog starts there.
func startTask(t *testing.T, prolog string, dirs []string) *task {
	t.Helper()
	tk := &task{out: filepath.Join(t.TempDir(), "out")}
	out, err := os.Create(tk.out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tk.cmd = exec.Command("/bin/sh", "-c", "read go && "+prolog+" && grep Cpus_allowed_list: /proc/self/status")
	tk.cmd.Env = []string{"PATH=/usr/bin:/bin", "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURMD_NODENAME=node-a"}
	tk.cmd.Stdout, tk.cmd.Stderr = out, out
	tk.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := tk.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tk.cmd.Process.Kill()
		_ = tk.cmd.Wait()
	})
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(tk.cmd.Process.Pid)), 0o644); err != nil {
			t.Fatalf("move the task %d into %s: %v", tk.cmd.Process.Pid, dir, err)
		}
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	return tk
}

// wait waits for the task to exit, at most 20 s.
func (tk *task) wait() error {
	done := make(chan error, 1)
	go func() { done <- tk.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		_ = tk.cmd.Process.Kill()
		return errors.New("still running after 20 s")
	}
}

// output is what the task printed so far.
func (tk *task) output() string {
	b, _ := os.ReadFile(tk.out)
	return string(b)
}
