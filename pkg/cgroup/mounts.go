package cgroup

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Version is the cgroup version that carries the cpuset, cpu and memory controllers.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string { return "cgroup v" + strconv.Itoa(int(v)) }

// Controller names a cgroup controller finegrain writes.
type Controller string

const (
	CPUSet Controller = "cpuset"
	CPU    Controller = "cpu"
	Memory Controller = "memory"
	// BlockIO is v1's blkio hierarchy; on v2 the io controller of the unified hierarchy. It is
	// optional: without it the agent enforces no I/O limits.
	BlockIO Controller = "blkio"
)

// controllers are the controllers finegrain needs, in the order it writes them.
var controllers = []Controller{CPUSet, CPU, Memory}

// Mounts says where the cpuset, cpu and memory controllers are mounted.
type Mounts struct {
	Version Version
	// V1 maps each controller to its v1 hierarchy's mount point (cgroup v1 only); BlockIO is
	// present only where the blkio hierarchy is mounted.
	V1 map[Controller]string
	// Unified is the cgroup2 mount point (cgroup v2 only).
	Unified string
}

// Root returns the mount point of the hierarchy that carries controller c.
func (m Mounts) Root(c Controller) string {
	if m.Version == V2 {
		return m.Unified
	}
	return m.V1[c]
}

// DetectMounts reads a mountinfo file (normally /proc/self/mountinfo) and finds the cgroup
// hierarchies that carry the cpuset, cpu and memory controllers.
func DetectMounts(mountinfoPath string) (Mounts, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return Mounts{}, fmt.Errorf("read mount table %s: %w", mountinfoPath, err)
	}
	defer f.Close()
	m, err := ParseMountinfo(f)
	if err != nil {
		return Mounts{}, fmt.Errorf("mount table %s: %w", mountinfoPath, err)
	}
	return m, nil
}

// ParseMountinfo parses the mountinfo format of proc(5) with moby/sys/mountinfo. cgroup v1 is
// chosen when cpuset, cpu and memory are all mounted as v1 hierarchies (hybrid hosts also mount an
// empty cgroup2 tree, which is ignored), noting the blkio hierarchy where one is mounted (for I/O
// limits); cgroup v2 when none of them is on v1 and a cgroup2 file
// system is mounted. Only mounts of a hierarchy's root ("/" in the fourth field) are used: a bind
// mount or cgroup namespace view of a sub-tree cannot show the kubelet's kubepods tree.
func ParseMountinfo(r io.Reader) (Mounts, error) {
	entries, err := mountinfo.GetMountsFromReader(r, mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return Mounts{}, fmt.Errorf("malformed mountinfo entry: %w", err)
	}
	v1 := map[Controller]string{}
	v1Sub := map[Controller]string{}
	var unified string
	for _, e := range entries {
		if !filepath.IsAbs(e.Mountpoint) || !filepath.IsAbs(e.Root) {
			return Mounts{}, fmt.Errorf("malformed mountinfo entry %d (%s on %q, root %q): a cgroup mount's root and mount point must be absolute paths",
				e.ID, e.FSType, truncate(e.Mountpoint), truncate(e.Root))
		}
		root, mountpoint := filepath.Clean(e.Root), filepath.Clean(e.Mountpoint)
		if e.FSType == "cgroup2" {
			if root == "/" && unified == "" {
				unified = mountpoint
			}
			continue
		}
		for _, opt := range strings.Split(e.VFSOptions, ",") {
			c := Controller(opt)
			if !slices.Contains(controllers, c) && c != BlockIO {
				continue
			}
			if root != "/" {
				v1Sub[c] = root
			} else if v1[c] == "" {
				v1[c] = mountpoint
			}
		}
	}
	return chooseVersion(v1, v1Sub, unified)
}

// chooseVersion decides between the v1 hierarchies (by controller; v1Sub holds the controllers
// mounted only as a sub-tree) and the unified mount.
func chooseVersion(v1, v1Sub map[Controller]string, unified string) (Mounts, error) {
	var onV1, notV1 []string
	for _, c := range controllers {
		if v1[c] != "" {
			onV1 = append(onV1, string(c))
			continue
		}
		if root, ok := v1Sub[c]; ok {
			return Mounts{}, fmt.Errorf("cgroup v1 %s controller is only mounted with root %q (a bind mount or cgroup namespace view of a sub-tree): mount the host's whole %s hierarchy", c, root, c)
		}
		notV1 = append(notV1, string(c))
	}
	switch {
	case len(notV1) == 0:
		return Mounts{Version: V1, V1: v1}, nil
	case len(onV1) > 0:
		return Mounts{}, fmt.Errorf("controllers %s are on cgroup v1 but %s are not: finegrain needs cpuset, cpu and memory on one cgroup version", strings.Join(onV1, ","), strings.Join(notV1, ","))
	case unified == "":
		return Mounts{}, fmt.Errorf("no cgroup v1 cpuset/cpu/memory hierarchy and no cgroup2 mount: mount the host's cgroup file system (e.g. /sys/fs/cgroup)")
	}
	return Mounts{Version: V2, Unified: unified}, nil
}
