package cgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"

	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Writer is what the node agent needs from the host's cgroups. FS is the real one;
// cgrouptest.Recorder records calls for unit tests.
type Writer interface {
	// Apply brings a container's cgroup to want, writing only files whose content differs, and
	// reports what it wrote. A container whose cgroup is gone yields an error wrapping
	// ErrVanished and nothing is created.
	Apply(ref ContainerRef, want Resources) (Result, error)
	// Read returns what a container's cgroup carries now, for drift detection and inspection.
	Read(ref ContainerRef) (State, error)
	// Enumerate lists the container cgroups present under kubepods with their cpusets.
	Enumerate() ([]Container, error)
}

var _ Writer = (*FS)(nil)

// FS reads and writes the kubelet's container cgroups on the mounted cgroup file systems. All
// file access goes through github.com/opencontainers/cgroups, which opens files below
// /sys/fs/cgroup with openat2(RESOLVE_BENEATH) and refuses files that are not on a cgroup file
// system elsewhere, and never creates a cgroup. FS holds no state between calls and is safe for
// concurrent use; callers serialize the Applies to any one container (concurrent Applies to
// different containers of one pod are safe: on v1 they only ever widen the shared ancestors).
type FS struct {
	layout Layout
	log    *slog.Logger
}

// NewFS returns a writer for the cgroups of layout l.
func NewFS(l Layout, log *slog.Logger) (*FS, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &FS{layout: l, log: log}, nil
}

// Layout returns the layout the writer was built with.
func (f *FS) Layout() Layout { return f.layout }

// Write is one interface file write: Old is the content read while planning (in canonical
// spelling), New the content written.
type Write struct {
	Dir  string
	File string
	Old  string
	New  string
}

// SetsCPUSet reports whether the write changes a cgroup's cpuset.cpus or cpuset.mems, rather
// than a flag, a quota or a limit.
func (w Write) SetsCPUSet() bool { return w.File == fileCPUs || w.File == fileMems }

func (w Write) String() string {
	return fmt.Sprintf("%s: %s -> %s", filepath.Join(w.Dir, w.File), w.Old, w.New)
}

// read returns a file's content in canonical spelling.
func (f *FS) read(ref ContainerRef, c Controller, dir, file string) (string, error) {
	raw, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return "", f.classify(ref, c, dir, file, "read", err)
	}
	s, err := canonical(file, raw)
	if err != nil {
		return "", fmt.Errorf("container %s: cgroup %s: %w", ref, dir, err)
	}
	return s, nil
}

func (f *FS) readSet(ref ContainerRef, c Controller, dir, file string) (cpuset.CPUSet, error) {
	s, err := f.read(ref, c, dir, file)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	set, err := cpulist.Parse(s)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("container %s: %s in %s: %w", ref, file, dir, err)
	}
	return set, nil
}

// classify turns a failed access into a vanished container, a missing kubepods tree, a missing
// controller file, or the original error, each naming the container and the file. It only
// inspects the file system on the failure path.
func (f *FS) classify(ref ContainerRef, c Controller, dir, file, op string, err error) error {
	path := filepath.Join(dir, file)
	if !isGone(err) {
		return fmt.Errorf("container %s: %s %s: %w", ref, op, path, err)
	}
	if dirExists(dir) {
		return fmt.Errorf("container %s: %s %s: the cgroup exists but the file does not; mount the controller (v1) or enable it in the parent's cgroup.subtree_control (v2): %w: %w", ref, op, path, ErrControllerMissing, err)
	}
	podDir, perr := f.layout.PodDir(c, ref.Pod)
	if perr != nil {
		return perr
	}
	if qosDir := filepath.Dir(podDir); !dirExists(qosDir) {
		return fmt.Errorf("container %s: %s missing: check that the cgroup driver (%s) and base %q match the kubelet's: %w", ref, qosDir, f.layout.Driver, f.layout.Base, ErrKubepodsMissing)
	}
	return fmt.Errorf("container %s: %s missing (the container exited or is not created yet): %w", ref, dir, ErrVanished)
}

// writeFile performs one write through the library and explains the kernel's refusals.
func (f *FS) writeFile(ref ContainerRef, w Write) error {
	err := cgroups.WriteFile(w.Dir, w.File, w.New)
	if err == nil {
		f.log.Debug("cgroup write", "container", ref.String(), "dir", w.Dir, "file", w.File, "old", w.Old, "new", w.New)
		return nil
	}
	if isGone(err) {
		return f.classify(ref, controllerOf(w.File), w.Dir, w.File, "write", err)
	}
	hint := ""
	switch {
	case f.layout.Mounts.Version == V1 && (w.File == fileCPUs || w.File == fileMems) && errors.Is(err, syscall.EACCES):
		hint = " (cgroup v1: the value is not a subset of the parent's cpuset)"
	case f.layout.Mounts.Version == V1 && (w.File == fileCPUs || w.File == fileMems) && errors.Is(err, syscall.EBUSY):
		hint = " (cgroup v1: a child cgroup holds CPUs or nodes outside the new set)"
	case (w.File == fileQuota || w.File == filePeriod) && errors.Is(err, syscall.EINVAL):
		hint = " (cgroup v1: a container's quota/period may not exceed its pod's; raise the pod's cpu.cfs_quota_us first)"
	}
	return fmt.Errorf("container %s: write %q to %s%s: %w", ref, w.New, filepath.Join(w.Dir, w.File), hint, err)
}
