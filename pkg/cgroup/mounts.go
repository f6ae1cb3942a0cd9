package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
)

// controllers are the controllers finegrain needs, in the order it writes them.
var controllers = []Controller{CPUSet, CPU, Memory}

// Mounts says where the cpuset, cpu and memory controllers are mounted.
type Mounts struct {
	Version Version
	// V1 maps each controller to its v1 hierarchy's mount point (cgroup v1 only).
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

// ParseMountinfo parses the mountinfo format of proc(5). cgroup v1 is chosen when cpuset, cpu
// and memory are all mounted as v1 hierarchies (hybrid hosts also mount an empty cgroup2 tree,
// which is ignored); cgroup v2 when none of them is on v1 and a cgroup2 file system is mounted.
// Only mounts of a hierarchy's root ("/" in the fourth field) are used: a bind mount or cgroup
// namespace view of a sub-tree cannot show the kubelet's kubepods tree.
func ParseMountinfo(r io.Reader) (Mounts, error) {
	v1 := map[Controller]string{}
	v1Sub := map[Controller]string{}
	var unified string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := parseMountinfoLine(line)
		if err != nil {
			return Mounts{}, fmt.Errorf("line %d: %w", n, err)
		}
		switch e.fstype {
		case "cgroup2":
			if e.root == "/" && unified == "" {
				unified = e.mountpoint
			}
		case "cgroup":
			for _, opt := range strings.Split(e.superOpts, ",") {
				c := Controller(opt)
				if !slices.Contains(controllers, c) {
					continue
				}
				if e.root != "/" {
					v1Sub[c] = e.root
				} else if v1[c] == "" {
					v1[c] = e.mountpoint
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Mounts{}, fmt.Errorf("read: %w", err)
	}
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

type mountinfoEntry struct {
	root, mountpoint, fstype, superOpts string
}

// parseMountinfoLine splits "id parent major:minor root mountpoint options [optional...] -
// fstype source super-options". Paths are decoded and checked for cgroup mounts only; other
// file systems (nsfs shows "net:[...]" as its root) are not looked at further.
func parseMountinfoLine(line string) (mountinfoEntry, error) {
	fields := strings.Split(line, " ")
	sep := slices.Index(fields, "-")
	if sep < 6 || len(fields) < sep+4 {
		return mountinfoEntry{}, fmt.Errorf("malformed mountinfo entry %q: want \"id parent major:minor root mountpoint options [optional...] - fstype source super-options\"", truncate(line))
	}
	e := mountinfoEntry{fstype: fields[sep+1], superOpts: fields[sep+3]}
	if e.fstype != "cgroup" && e.fstype != "cgroup2" {
		return e, nil
	}
	root, err := unescapeMountinfo(fields[3])
	if err != nil {
		return mountinfoEntry{}, err
	}
	mp, err := unescapeMountinfo(fields[4])
	if err != nil {
		return mountinfoEntry{}, err
	}
	if !filepath.IsAbs(mp) || !filepath.IsAbs(root) {
		return mountinfoEntry{}, fmt.Errorf("malformed mountinfo entry %q: a cgroup mount's root and mount point must be absolute paths", truncate(line))
	}
	e.root, e.mountpoint = filepath.Clean(root), filepath.Clean(mp)
	return e, nil
}

// unescapeMountinfo decodes the kernel's octal escapes (\040 for space, \011, \012, \134).
func unescapeMountinfo(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("malformed escape in mountinfo path %q", truncate(s))
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("malformed escape in mountinfo path %q", truncate(s))
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
