package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// maxStatusBytes bounds the /proc/<pid>/status read: the file is about 1.5 KiB, its CPU masks
// grow by 9 bytes per 32 CPUs.
const maxStatusBytes = 64 << 10

// maxCommandBytes bounds a process name as status shows it: 15 bytes of comm, each escaped to
// at most four.
const maxCommandBytes = 64

// Process is one process of a container cgroup, as the kernel shows it in /proc.
type Process struct {
	// PID is the process ID in the PID namespace the cgroup file system reports in (the host's,
	// for a node agent with hostPID).
	PID int
	// Command is the kernel's name of the process (comm), with the kernel's escapes.
	Command string
	// Cgroup is the sub-cgroup below the container's own that holds the process, "" for the
	// container's cgroup itself.
	Cgroup string
	// CPUs and Mems are the status file's Cpus_allowed_list and Mems_allowed_list: where the
	// process may run and allocate memory now.
	CPUs, Mems cpuset.CPUSet
	// Rank is its MPI rank, read from its environment (ParseRank); Problem says why the rank or
	// anything else could not be read, empty when everything was.
	Rank    Rank
	Problem string
}

// procReader reads processes below a procfs mount point.
type procReader struct{ root string }

// errExited reports a process that exited between the listing and the read.
var errExited = errors.New("process exited")

// read returns what the process's status and environment say; errExited when it is gone.
func (p procReader) read(pid int) (Process, error) {
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	proc := Process{PID: pid}
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		if isExited(err) {
			return Process{}, errExited
		}
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	proc.Command, proc.CPUs, proc.Mems, err = parseStatus(io.LimitReader(f, maxStatusBytes))
	f.Close()
	if err != nil {
		return Process{}, fmt.Errorf("process %d: %s: %w", pid, filepath.Join(dir, "status"), err)
	}
	proc.Rank, proc.Problem = p.rank(dir)
	return proc, nil
}

// rank reads the MPI rank from the process's environment; the second result says why it could
// not, in words for the person reading the listing.
func (p procReader) rank(dir string) (Rank, string) {
	f, err := os.Open(filepath.Join(dir, "environ"))
	switch {
	case errors.Is(err, os.ErrPermission):
		return Rank{}, "no rank number: the process's environment is not readable (permission denied); the node agent reads rank numbers when its container has CAP_SYS_PTRACE (daemonset/nodeagent/daemonset.yaml says why it has not by default)"
	case err != nil && isExited(err):
		return Rank{}, "exited while read"
	case err != nil:
		return Rank{}, fmt.Sprintf("environment not readable: %v", err)
	}
	defer f.Close()
	r, err := ParseRank(f, MaxEnvironBytes)
	switch {
	case errors.Is(err, ErrEnvironTruncated):
		return r, fmt.Sprintf("no rank variable in the first %d KiB of a longer environment", MaxEnvironBytes>>10)
	case errors.Is(err, ErrMalformedRank):
		return r, err.Error()
	case err != nil:
		return r, fmt.Sprintf("environment not readable: %v", err)
	}
	return r, ""
}

// parseStatus reads the Name, Cpus_allowed_list and Mems_allowed_list fields of a
// /proc/<pid>/status file.
func parseStatus(r io.Reader) (name string, cpus, mems cpuset.CPUSet, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxStatusBytes)
	var haveName, haveCPUs, haveMems bool
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimLeft(value, " \t")
		switch key {
		case "Name":
			name, haveName = value[:min(len(value), maxCommandBytes)], true
		case "Cpus_allowed_list":
			if cpus, err = cpulist.Parse(value); err != nil {
				return "", cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("Cpus_allowed_list %q: %w", truncate(value), err)
			}
			haveCPUs = true
		case "Mems_allowed_list":
			if mems, err = cpulist.Parse(value); err != nil {
				return "", cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("Mems_allowed_list %q: %w", truncate(value), err)
			}
			haveMems = true
		}
	}
	if err := sc.Err(); err != nil {
		return "", cpuset.CPUSet{}, cpuset.CPUSet{}, err
	}
	if !haveName || !haveCPUs || !haveMems {
		return "", cpuset.CPUSet{}, cpuset.CPUSet{}, errors.New("no Name, Cpus_allowed_list or Mems_allowed_list line: not a Linux /proc/<pid>/status file")
	}
	return name, cpus, mems, nil
}

// isExited reports whether a /proc access failed because the process is gone (ENOENT for the
// directory, ESRCH for a file of a process that exited while open).
func isExited(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
