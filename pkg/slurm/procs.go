package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Process is what the confinement of a Slurm job's processes needs to know of one process:
// its parent, the program it runs and its title.
type Process struct {
	PID, PPID int
	// Exe is where /proc/<pid>/exe points (in the process's mount namespace).
	Exe string
	// Title is its command line, arguments joined by spaces (slurmstepd rewrites it to
	// "slurmstepd: [<job>.<step>]").
	Title string
}

// maxProcBytes bounds what is read of a process's stat and cmdline files.
const maxProcBytes = 4096

// stepTitle is a slurmstepd's title: the job and the step (a number, batch, extern,
// interactive).
var stepTitle = regexp.MustCompile(`^slurmstepd: \[([0-9]+)\.([0-9]+|batch|extern|interactive)\]`)

// ReadProcesses reads the processes of pids below procRoot (a procfs, /proc); processes that
// exit meanwhile are left out (gone: ENOENT; exiting while a file of theirs is read: ESRCH).
func ReadProcesses(procRoot string, pids []int) ([]Process, error) {
	var out []Process
	for _, pid := range pids {
		p, err := readProcess(filepath.Join(procRoot, strconv.Itoa(pid)), pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func readProcess(dir string, pid int) (Process, error) {
	stat, err := readBounded(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 2 {
		return Process{}, fmt.Errorf("process %d: %s is not a /proc/<pid>/stat file", pid, filepath.Join(dir, "stat"))
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Process{}, fmt.Errorf("process %d: parent %q in %s: %w", pid, fields[1], filepath.Join(dir, "stat"), err)
	}
	cmdline, err := readBounded(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Process{}, err
	}
	// A process that exited is a zombie without an exe: it runs nothing, it belongs to no job.
	exe, _ := os.Readlink(filepath.Join(dir, "exe"))
	title := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	return Process{PID: pid, PPID: ppid, Exe: exe, Title: title}, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcBytes))
}

// IsStepd reports whether a process is a slurmstepd (its program is Slurm's slurmstepd, Debian's
// slurmstepd-wlm included) and of which job, as its title says.
func IsStepd(p Process) (JobID, bool) {
	if !strings.HasPrefix(filepath.Base(p.Exe), "slurmstepd") {
		return 0, false
	}
	m := stepTitle.FindStringSubmatch(p.Title)
	if m == nil {
		return 0, false
	}
	id, err := ParseJobID(m[1])
	return id, err == nil
}

// JobProcesses assigns processes to the Slurm jobs they run for: each slurmstepd (by its
// program and title) and every process below it in the parent chain among procs, the batch
// script, srun, mpirun and the ranks included; zombies left out. A process of no job (slurmd, munged, sshd, a
// shell) is left out. The job ID it reads says which job's placeholder a process belongs in; it
// never names a cgroup or a CPU.
func JobProcesses(procs []Process) map[JobID][]int {
	byPID := make(map[int]Process, len(procs))
	for _, p := range procs {
		byPID[p.PID] = p
	}
	jobOf := make(map[int]JobID, len(procs))
	var find func(pid int, depth int) (JobID, bool)
	find = func(pid int, depth int) (JobID, bool) {
		if id, ok := jobOf[pid]; ok {
			return id, id != 0
		}
		p, ok := byPID[pid]
		if !ok || depth > len(procs) {
			return 0, false
		}
		id, ok := IsStepd(p)
		if !ok && p.PPID != pid {
			id, ok = find(p.PPID, depth+1)
		}
		jobOf[pid] = id
		return id, ok
	}
	out := map[JobID][]int{}
	for _, p := range procs {
		if p.Exe == "" {
			continue // a zombie (or a kernel thread) runs nothing to confine
		}
		if id, ok := find(p.PID, 0); ok {
			out[id] = append(out[id], p.PID)
		}
	}
	return out
}
