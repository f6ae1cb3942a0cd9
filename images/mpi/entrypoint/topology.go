package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// hwloc, through which Open MPI and MPICH bind ranks to cores, learns a container's cpuset from
// the cgroup file system at the path /proc/self/cgroup names. On cgroup v1 nodes runc mounts only
// the container's own cgroup directory at /sys/fs/cgroup/cpuset, so that path does not exist and
// hwloc takes every CPU of the node as allowed: Open MPI then binds ranks to CPUs outside the
// container's cpuset, which the kernel refuses, and the job fails. A worker therefore writes the
// topology restricted to its own CPU affinity (the kernel keeps it equal to the cpuset) and makes
// hwloc read that file in every session of its sshd (HWLOC_XMLFILE, HWLOC_THISSYSTEM=1 so that
// binding still acts on this machine); the image's /etc/ssh/sshrc rewrites the file at the start
// of each session, so a cpuset changed after the container started is seen too.

// lstopo is hwloc's tool that exports a topology (Debian package hwloc-nox).
const lstopo = "lstopo-no-graphics"

// writeTopology writes the topology of the CPUs this process may run on to path, as hwloc XML.
// It reports false, and writes nothing, when lstopo is not installed.
func writeTopology(path string) (bool, error) {
	bin, err := exec.LookPath(lstopo)
	if errors.Is(err, exec.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look for %s: %w", lstopo, err)
	}
	tmp := path + ".tmp"
	var out bytes.Buffer
	cmd := exec.Command(bin, "--restrict", "binding", "--of", "xml", "-f", tmp)
	// The topology of the machine itself, not one an earlier file describes.
	cmd.Env = withoutHwlocTopology(os.Environ())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("write this container's CPU topology with %s: %w: %s", bin, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("move the CPU topology into place: %w", err)
	}
	return true, nil
}

// withoutHwlocTopology drops the variables that make hwloc read a topology file.
func withoutHwlocTopology(env []string) []string {
	var kept []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HWLOC_XMLFILE=") && !strings.HasPrefix(kv, "HWLOC_THISSYSTEM=") {
			kept = append(kept, kv)
		}
	}
	return kept
}
