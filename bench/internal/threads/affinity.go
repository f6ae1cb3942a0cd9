// Package threads observes where the threads of one process run: the CPU affinity the process
// had before main started, each thread's voluntary and involuntary context switches
// (/proc/PID/task/TID/status) and the CPUs each thread was seen running on (the processor field
// of /proc/PID/task/TID/stat, sampled while the thread's run time grows). It only reads; it never
// changes affinity or moves a thread.
package threads

import (
	"fmt"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

var (
	initAffinity    cpuset.CPUSet
	initAffinityErr error
)

// init records the affinity of the main thread before any other code of the program runs, so a
// process that was started inside a pinned cgroup can show it was pinned from its first
// instruction, not moved there later.
func init() {
	initAffinity, initAffinityErr = Affinity(0)
}

// InitAffinity returns the CPUs the process was allowed to run on when it started.
func InitAffinity() (cpuset.CPUSet, error) { return initAffinity, initAffinityErr }

// Affinity returns the CPUs thread tid may run on (0: the calling thread).
func Affinity(tid int) (cpuset.CPUSet, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return cpuset.New(), fmt.Errorf("sched_getaffinity of thread %d: %w", tid, err)
	}
	var cpus []int
	for cpu := 0; len(cpus) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpuset.New(cpus...), nil
}
