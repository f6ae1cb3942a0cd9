package cgroup

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Driver is the kubelet's cgroup driver (its --cgroup-driver / cgroupDriver setting).
type Driver string

const (
	// Cgroupfs names cgroups kubepods/burstable/pod<uid>/<container>.
	Cgroupfs Driver = "cgroupfs"
	// Systemd names cgroups kubepods.slice/kubepods-burstable.slice/
	// kubepods-burstable-pod<uid with _>.slice/<runtime>-<id>.scope.
	Systemd Driver = "systemd"
)

// ParseDriver accepts "cgroupfs" or "systemd".
func ParseDriver(s string) (Driver, error) {
	switch d := Driver(s); d {
	case Cgroupfs, Systemd:
		return d, nil
	}
	return "", fmt.Errorf("cgroup driver %q: want cgroupfs or systemd, the kubelet's cgroupDriver setting", truncate(s))
}

// Layout locates the kubelet's cgroups on one host: where the hierarchies are mounted, which
// driver named the cgroups, and the directory below each mount that holds the kubepods tree.
type Layout struct {
	Mounts Mounts
	Driver Driver
	// Base is a relative directory below each hierarchy's mount point that holds the kubepods
	// tree: empty for a kubelet with the default --cgroup-root=/, the --cgroup-root itself (without
	// the leading slash) for the cgroupfs driver, or a subtree a test owns.
	Base string
}

// NewLayout checks its parts and returns a Layout.
func NewLayout(m Mounts, d Driver, base string) (Layout, error) {
	l := Layout{Mounts: m, Driver: d, Base: base}
	if err := l.validate(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

func (l Layout) validate() error {
	if _, err := ParseDriver(string(l.Driver)); err != nil {
		return err
	}
	if l.Base != "" && (!filepath.IsLocal(l.Base) || filepath.Clean(l.Base) != l.Base) {
		return fmt.Errorf("cgroup base %q: want a clean relative path below the hierarchy mount points, or empty", l.Base)
	}
	switch l.Mounts.Version {
	case V1, V2:
	default:
		return fmt.Errorf("cgroup mounts: unknown version %d", l.Mounts.Version)
	}
	for _, c := range controllers {
		root := l.Mounts.Root(c)
		if !filepath.IsAbs(root) || filepath.Clean(root) != root {
			return fmt.Errorf("cgroup mounts: %s hierarchy mount point %q is not a clean absolute path", c, root)
		}
	}
	return nil
}

// KubepodsDir returns the kubepods cgroup directory in the hierarchy that carries c.
func (l Layout) KubepodsDir(c Controller) string {
	return filepath.Join(l.Mounts.Root(c), l.Base, l.Driver.kubepods())
}

// PodDir returns the pod's cgroup directory in the hierarchy that carries c.
func (l Layout) PodDir(c Controller, p PodRef) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	return l.join(c, l.Driver.podPath(p))
}

// ContainerDir returns the container's cgroup directory in the hierarchy that carries c.
func (l Layout) ContainerDir(c Controller, r ContainerRef) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return l.join(c, l.Driver.containerPath(r))
}

// chain returns the directories from kubepods down to the container's, in the hierarchy that
// carries c; the IDs must already be validated.
func (l Layout) chain(c Controller, r ContainerRef) []string {
	parts := l.Driver.containerParts(r)
	dirs := make([]string, len(parts))
	dir := filepath.Join(l.Mounts.Root(c), l.Base)
	for i, p := range parts {
		dir = filepath.Join(dir, p)
		dirs[i] = dir
	}
	return dirs
}

// join places a relative kubelet path below the hierarchy root and the base, refusing anything
// that would not stay lexically beneath them.
func (l Layout) join(c Controller, rel string) (string, error) {
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("cgroup path %q escapes the cgroup root: %w", truncate(rel), ErrInvalidID)
	}
	return filepath.Join(l.Mounts.Root(c), l.Base, rel), nil
}

// ParseDir turns an absolute cgroup directory path, as inotify reports it, back into the
// kubelet object it belongs to. The path must be clean and lie below one of the layout's
// hierarchy roots and its base.
func (l Layout) ParseDir(dir string) (Location, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return Location{}, fmt.Errorf("cgroup directory %q is not a clean absolute path: %w", truncate(dir), ErrUnrecognized)
	}
	for _, c := range controllers {
		prefix := filepath.Join(l.Mounts.Root(c), l.Base) + "/"
		if rel, ok := strings.CutPrefix(dir, prefix); ok {
			return ParseRelPath(l.Driver, rel)
		}
	}
	return Location{}, fmt.Errorf("cgroup directory %q is not below a %s hierarchy with base %q: %w", truncate(dir), l.Mounts.Version, l.Base, ErrUnrecognized)
}
