package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// mode is one way the agent learns of new containers.
type mode string

const (
	// modeInotify is the agent's default: inotify plus the CRI runtime for names.
	modeInotify mode = "inotify"
	// modeInformer is the slow fallback alone: no inotify, no CRI; the pod status names the
	// container.
	modeInformer mode = "informer"
)

// modeArgs are the flags that select a mode (NRI is off in both: this program measures the
// paths that react to a cgroup after its creation); every other flag stays as it is.
func modeArgs(m mode, criEndpoint string) []string {
	if m == modeInformer {
		return []string{"--nri=off", "--inotify=false", "--cri-endpoint="}
	}
	return []string{"--nri=off", "--inotify=true", "--cri-endpoint=" + criEndpoint}
}

// withMode replaces the mode flags in args.
func withMode(args []string, m mode, criEndpoint string) []string {
	return agentbench.ReplaceFlags(args, []string{"inotify", "cri-endpoint", "nri"}, modeArgs(m, criEndpoint)...)
}

// criEndpoint returns the --cri-endpoint the DaemonSet runs with.
func criEndpoint(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--cri-endpoint="); ok && v != "" {
			return v
		}
	}
	return "unix:///run/containerd/containerd.sock"
}

// agentPID returns the agent process's PID, from its container cgroup under layout.
func agentPID(layout cgroup.Layout, pod *corev1.Pod) (int, error) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return 0, fmt.Errorf("agent pod %s has no container status", pod.Name)
	}
	ref, err := cgroup.NewContainerRef(string(pod.UID), string(pod.Status.QOSClass), pod.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		return 0, err
	}
	dir, err := layout.ContainerDir(cgroup.CPUSet, ref)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, fmt.Errorf("agent processes: %w", err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	return strconv.Atoi(first)
}

// usage is a process's CPU time and resident memory.
type usage struct {
	cpu time.Duration
	rss int64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTicks = 100

func readUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return usage{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: unexpected times %q %q", pid, f[11], f[12])
	}
	u := usage{cpu: time.Duration(utime+stime) * time.Second / clockTicks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("/proc/%d/status VmRSS %q: %w", pid, v, err)
			}
			u.rss = kb << 10
		}
	}
	return u, nil
}
