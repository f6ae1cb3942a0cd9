package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrVanished reports that a container's cgroup (or its pod's) no longer exists: the
	// container exited, or its runtime has not created it yet. The writer never re-creates it;
	// the caller should drop the container rather than retry.
	ErrVanished = errors.New("container cgroup vanished")
	// ErrInvalidID reports a pod UID, QoS class, container ID or cgroup path component that
	// fails strict validation; no path is ever built from such a value.
	ErrInvalidID = errors.New("invalid identifier")
	// ErrUnrecognized reports a cgroup directory that is not a kubelet-managed pod or container
	// cgroup of the configured driver (a runtime's helper cgroup, a container's own
	// sub-cgroups, or something else entirely).
	ErrUnrecognized = errors.New("not a kubelet pod or container cgroup")
	// ErrPartition reports a cgroup v2 container cgroup that is itself a cpuset partition; its
	// cpuset is left alone because rewriting it could invalidate the partition.
	ErrPartition = errors.New("cgroup is a cpuset partition")
	// ErrKubepodsMissing reports that the kubelet's kubepods tree (or its QoS level) is absent,
	// which usually means the configured cgroup driver or base does not match the kubelet's.
	ErrKubepodsMissing = errors.New("kubelet kubepods cgroup not found")
	// ErrControllerMissing reports a cgroup interface file that is absent from an existing
	// cgroup: the controller is not mounted (v1) or not enabled in the parent's
	// cgroup.subtree_control (v2).
	ErrControllerMissing = errors.New("cgroup controller file missing")
)

// isGone reports whether err means the file or its directory does not exist or has been
// removed while open (ENODEV on cgroupfs).
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// dirExists reports whether dir exists; any error other than "does not exist" counts as
// existing so that the caller reports the original error instead of guessing a vanish.
func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// truncate shortens untrusted input for error messages.
func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// invalid builds an ErrInvalidID error naming what was wrong with which value.
func invalid(what, value, want string) error {
	return fmt.Errorf("%s %q: %s: %w", what, truncate(value), want, ErrInvalidID)
}
