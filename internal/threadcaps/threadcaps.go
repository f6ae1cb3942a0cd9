// Package threadcaps runs a function on an OS thread with fewer capabilities than the process,
// for tests that show what the node agent, whose DaemonSet drops every capability, may and may not
// do. The thread ends with the function (a thread's permitted capabilities cannot be raised
// again): a child process started with Pdeathsig from a thread the runtime later hands to this
// package dies then, so a test that starts such children keeps its goroutine on its own thread
// (runtime.LockOSThread) while it uses this package.
package threadcaps

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Without runs f on an OS thread of its own whose capability sets (effective, permitted,
// inheritable) are empty, as every thread of the node agent is (its DaemonSet drops every
// capability), and returns f's error.
func Without(f func() error) error {
	return withCapabilities(0, f)
}

// Only runs f as Without does, but on a thread that keeps one capability (unix.CAP_*) effective
// and permitted.
func Only(capability uint, f func() error) error {
	return withCapabilities(1<<capability, f)
}

// withCapabilities runs f on a thread whose effective and permitted sets are mask and whose
// inheritable set is empty. Capabilities belong to a thread on Linux: the thread stays locked to
// f's goroutine and exits with it, so no other goroutine ever runs on it and nothing has to be
// given back. Before f runs it checks the thread's sets in /proc/thread-self/status.
func withCapabilities(mask uint64, f func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends a thread whose goroutine exits while locked to it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		sets := [2]unix.CapUserData{
			{Effective: uint32(mask), Permitted: uint32(mask)},
			{Effective: uint32(mask >> 32), Permitted: uint32(mask >> 32)},
		}
		if err := unix.Capset(&hdr, &sets[0]); err != nil {
			done <- fmt.Errorf("set the capabilities of this thread to %#x: %w", mask, err)
			return
		}
		status, err := os.ReadFile("/proc/thread-self/status")
		if err != nil {
			done <- err
			return
		}
		want := map[string]uint64{"CapEff": mask, "CapPrm": mask, "CapInh": 0}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if w, ok := want[k]; ok {
				if got, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil || got != w {
					done <- fmt.Errorf("the thread holds other capabilities than %#x after capset: %s", mask, line)
					return
				}
			}
		}
		done <- f()
	}()
	return <-done
}
