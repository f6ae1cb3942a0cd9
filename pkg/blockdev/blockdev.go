// Package blockdev finds the block devices that back directories of the node, for the node
// agent's I/O limits: a directory's file system is found in a mount table (the longest mount
// point above it; of equal ones the last, which shadows the others) and its device number in
// that entry, or, for file systems that report an anonymous device (btrfs), through the
// /sys/class/block entry of a /dev source; /sys/dev/block then says whether the device is a
// partition, and a partition is replaced by its whole disk, because the kernel throttles only
// whole disks (blkio.throttle.* and io.max refuse a partition). Directories on file systems
// without a block device (overlay, tmpfs, NFS) or on a device whose /dev name is not in
// /sys/class/block (device-mapper sources named by /dev/mapper links) are reported as skipped
// with the reason. It reads only the mount table and sysfs it is given, never a path a pod
// names, and writes nothing.
package blockdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Backing is the device found for one directory.
type Backing struct {
	// Path is the directory asked about; Mount the mount point holding it and FSType its type.
	Path, Mount, FSType string
	// Device is the whole disk; Partition the partition the file system is on, when it is one.
	Device    cgroup.Device
	Partition *cgroup.Device
}

// Skipped is a directory without a block device to throttle, and why.
type Skipped struct {
	Path, Reason string
}

// Result is what Find found: the directories' whole disks (Devices, sorted and distinct) and the
// directories it could not place on one.
type Result struct {
	Backings []Backing
	Devices  []cgroup.Device
	Skipped  []Skipped
}

// Find places each of paths (absolute host paths) on its whole-disk block device, reading the
// mount table at mountinfoPath and the sysfs tree at sysfsRoot.
func Find(mountinfoPath, sysfsRoot string, paths []string) (Result, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return Result{}, fmt.Errorf("read mount table %s: %w", mountinfoPath, err)
	}
	defer f.Close()
	mounts, err := mountinfo.GetMountsFromReader(f, nil)
	if err != nil {
		return Result{}, fmt.Errorf("mount table %s: %w", mountinfoPath, err)
	}
	var res Result
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return Result{}, fmt.Errorf("directory %q: want an absolute host path", p)
		}
		b, reason, err := place(mounts, sysfsRoot, filepath.Clean(p))
		if err != nil {
			return Result{}, err
		}
		if reason != "" {
			res.Skipped = append(res.Skipped, Skipped{Path: p, Reason: reason})
			continue
		}
		res.Backings = append(res.Backings, b)
		if !slices.Contains(res.Devices, b.Device) {
			res.Devices = append(res.Devices, b.Device)
		}
	}
	slices.SortFunc(res.Devices, func(a, b cgroup.Device) int {
		if a.Major != b.Major {
			return int(a.Major) - int(b.Major)
		}
		return int(a.Minor) - int(b.Minor)
	})
	return res, nil
}

// place finds one directory's whole disk, or says why there is none.
func place(mounts []*mountinfo.Info, sysfs, p string) (Backing, string, error) {
	m := mountOf(mounts, p)
	if m == nil {
		return Backing{}, "no mount in the mount table holds it", nil
	}
	b := Backing{Path: p, Mount: m.Mountpoint, FSType: m.FSType}
	dev := cgroup.Device{Major: uint32(m.Major), Minor: uint32(m.Minor)}
	if dev.Major == 0 {
		name, ok := strings.CutPrefix(m.Source, "/dev/")
		if !ok || name == "" || strings.Contains(name, "/") {
			return Backing{}, fmt.Sprintf("%s file system on %s (source %q) has no block device", m.FSType, m.Mountpoint, m.Source), nil
		}
		raw, err := os.ReadFile(filepath.Join(sysfs, "class", "block", name, "dev"))
		if errors.Is(err, fs.ErrNotExist) {
			return Backing{}, fmt.Sprintf("%s file system on %s: its source %s is not in %s/class/block", m.FSType, m.Mountpoint, m.Source, sysfs), nil
		}
		if err != nil {
			return Backing{}, "", fmt.Errorf("device of %s: %w", m.Source, err)
		}
		if dev, err = cgroup.ParseDevice(strings.TrimSpace(string(raw))); err != nil {
			return Backing{}, "", fmt.Errorf("%s/class/block/%s/dev: %w", sysfs, name, err)
		}
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(sysfs, "dev", "block", dev.String()))
	if errors.Is(err, fs.ErrNotExist) {
		return Backing{}, fmt.Sprintf("%s file system on %s: device %s is not a block device", m.FSType, m.Mountpoint, dev), nil
	}
	if err != nil {
		return Backing{}, "", fmt.Errorf("block device %s in %s: %w", dev, sysfs, err)
	}
	b.Device = dev
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		part := dev
		b.Partition = &part
		disk := filepath.Dir(dir)
		raw, err := os.ReadFile(filepath.Join(disk, "dev"))
		if err != nil {
			return Backing{}, "", fmt.Errorf("whole disk of partition %s (%s): %w", dev, dir, err)
		}
		if b.Device, err = cgroup.ParseDevice(strings.TrimSpace(string(raw))); err != nil {
			return Backing{}, "", fmt.Errorf("%s/dev: %w", disk, err)
		}
	}
	return b, "", nil
}

// mountOf returns the mount that holds p: the longest mount point at or above it, the last
// listed among equals (it is mounted over the others).
func mountOf(mounts []*mountinfo.Info, p string) *mountinfo.Info {
	var best *mountinfo.Info
	for _, m := range mounts {
		mp := filepath.Clean(m.Mountpoint)
		if mp != "/" && p != mp && !strings.HasPrefix(p, mp+"/") {
			continue
		}
		if best == nil || len(mp) >= len(filepath.Clean(best.Mountpoint)) {
			best = m
		}
	}
	return best
}
