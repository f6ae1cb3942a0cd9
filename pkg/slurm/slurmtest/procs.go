package slurmtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// PIDs lists the processes of this PID namespace.
func PIDs(t testing.TB) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CPUsAllowed is a process's Cpus_allowed_list, "" once it has exited.
func CPUsAllowed(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// CPUSetCgroup is a process's cpuset cgroup (/proc/<pid>/cpuset), "" once it has exited.
func CPUSetCgroup(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cpuset", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
