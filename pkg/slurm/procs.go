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

// Process is what the confinement of a Slurm job's processes needs to know of one process, all
// of it read from files of /proc that the kernel shows to any reader, without a capability
// (never /proc/<pid>/exe, which a reader without CAP_SYS_PTRACE may not follow for a process
// that holds capabilities, as slurmstepd does).
type Process struct {
	PID, PPID int
	// Comm is the process's name as the kernel keeps it (/proc/<pid>/stat): the file name of the
	// program it runs, at most 15 bytes, unless the process renamed itself.
	Comm string
	// State is its state letter (/proc/<pid>/stat): Z for a zombie.
	State byte
	// UID is its real user ID (/proc/<pid>/status), as the reader's user namespace sees it.
	UID int
	// Title is its command line, arguments joined by spaces (slurmstepd rewrites it to
	// "slurmstepd: [<job>.<step>]").
	Title string
}

// maxProcBytes bounds what is read of a process's stat, status and cmdline files.
const maxProcBytes = 4096

// stepTitle is a slurmstepd's title: the job and the step (a number, batch, extern,
// interactive).
var stepTitle = regexp.MustCompile(`^slurmstepd: \[([0-9]+)\.([0-9]+|batch|extern|interactive)\]`)

// stepdComm is the name the kernel gives a slurmstepd (Debian's /usr/sbin/slurmstepd links to
// slurmstepd-wlm; slurmd runs it by the link's name).
const stepdComm = "slurmstepd"

// ReadProcesses reads the processes of pids below procRoot (a procfs, /proc); processes that
// exit meanwhile are left out (gone: ENOENT; exiting while a file of theirs is read: ESRCH). It
// needs no capability.
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
	statPath := filepath.Join(dir, "stat")
	stat, err := readBounded(statPath)
	if err != nil {
		return Process{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so it ends at the last ')'.
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Process{}, fmt.Errorf("process %d: %s is not a /proc/<pid>/stat file", pid, statPath)
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return Process{}, fmt.Errorf("process %d: %s is not a /proc/<pid>/stat file", pid, statPath)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Process{}, fmt.Errorf("process %d: parent %q in %s: %w", pid, fields[1], statPath, err)
	}
	uid, err := readUID(filepath.Join(dir, "status"), pid)
	if err != nil {
		return Process{}, err
	}
	cmdline, err := readBounded(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Process{}, err
	}
	title := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	return Process{PID: pid, PPID: ppid, Comm: string(stat[open+1 : end]), State: fields[0][0], UID: uid, Title: title}, nil
}

// readUID reads the real user ID of /proc/<pid>/status's "Uid:" line (real, effective, saved,
// file system).
func readUID(path string, pid int) (int, error) {
	status, err := readBounded(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		v, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		ids := strings.Fields(v)
		if len(ids) == 0 {
			break
		}
		uid, err := strconv.Atoi(ids[0])
		if err != nil || uid < 0 {
			return 0, fmt.Errorf("process %d: user ID %q in %s is not a number", pid, ids[0], path)
		}
		return uid, nil
	}
	return 0, fmt.Errorf("process %d: %s has no Uid line", pid, path)
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcBytes))
}

// IsStepd reports whether a process is a slurmstepd and of which job: named slurmstepd by the
// kernel, titled "slurmstepd: [<job>.<step>]", and run by root (real user ID 0), as slurmd starts
// every slurmstepd. All three are the process's own to set, for root in its PID namespace:
// JobProcesses says what that allows.
func IsStepd(p Process) (JobID, bool) {
	if p.Comm != stepdComm || p.UID != 0 {
		return 0, false
	}
	m := stepTitle.FindStringSubmatch(p.Title)
	if m == nil {
		return 0, false
	}
	id, err := ParseJobID(m[1])
	return id, err == nil
}

// JobProcesses assigns processes to the Slurm jobs they run for: each slurmstepd (IsStepd) whose
// parent belongs to no job, and every process below it in the parent chain among procs — the
// batch script, srun, mpirun and the ranks; zombies left out. A process of no job (slurmd,
// munged, sshd, a shell) is left out. slurmd starts a slurmstepd through a double fork, so a real
// slurmstepd's parent is the PID namespace's init (or a subreaper above slurmd), never a job's
// process: a process below a job that names itself the slurmstepd of another job stays in the
// job it runs in. The job ID it reads says which job's placeholder a process belongs in; it never
// names a cgroup or a CPU.
//
// What it reads, a process of the slurmd container may write: root there can start a process
// named and titled as the slurmstepd of any job of its virtual cluster. The node agent therefore
// only ever moves processes of a trusted slurmd container into the pinned placeholders of the
// same VirtualCluster on the same node (docs/slurm.md, "Confinement"): a poser moves
// its virtual cluster's own processes among its own placeholders, never onto another tenant's
// cores, never into a cgroup it names.
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
		var id JobID
		inJob := false
		if p.PPID != pid {
			id, inJob = find(p.PPID, depth+1)
		}
		if !inJob {
			id, inJob = IsStepd(p)
		}
		jobOf[pid] = id
		return id, inJob
	}
	out := map[JobID][]int{}
	for _, p := range procs {
		if p.State == 'Z' || p.State == 'X' {
			continue // an exited process runs nothing to confine
		}
		if id, ok := find(p.PID, 0); ok {
			out[id] = append(out[id], p.PID)
		}
	}
	return out
}
