package cgroup

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/opencontainers/cgroups"
)

// The interface files of block I/O throttling.
const (
	fileV1ReadBPS  = "blkio.throttle.read_bps_device"
	fileV1WriteBPS = "blkio.throttle.write_bps_device"
	fileIOMax      = "io.max"
)

// MaxIOBPS is the largest bandwidth limit finegrain writes (bytes per second): above it the
// kernel's own "no limit" (U64_MAX) is the same thing in practice, and the objective API caps
// its I/O bound far below.
const MaxIOBPS = math.MaxInt64

// maxIOLines bounds the lines read from one throttle file (one per limited device).
const maxIOLines = 4096

// Device is a block device's kernel number, as /sys/dev/block and the throttle files spell it
// ("MAJ:MIN").
type Device struct {
	Major, Minor uint32
}

func (d Device) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// ParseDevice reads "MAJ:MIN" with decimal numbers.
func ParseDevice(s string) (Device, error) {
	maj, minor, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Device{}, fmt.Errorf("block device %q: want MAJ:MIN in decimal", truncate(s))
	}
	return Device{Major: uint32(a), Minor: uint32(b)}, nil
}

// IOLimit is a block I/O bandwidth limit in bytes per second for reads and for writes; zero
// means no limit in that direction.
type IOLimit struct {
	ReadBPS, WriteBPS uint64
}

// Validate checks the limit against MaxIOBPS.
func (l IOLimit) Validate() error {
	if l.ReadBPS > MaxIOBPS || l.WriteBPS > MaxIOBPS {
		return fmt.Errorf("I/O limit read %d, write %d bytes/s: want at most %d", l.ReadBPS, l.WriteBPS, int64(MaxIOBPS))
	}
	return nil
}

// IOLimits is what a throttle file says: each limited device's limit. A device absent from the
// map has no limit.
type IOLimits map[Device]IOLimit

// ParseV1Throttle parses a cgroup v1 blkio.throttle.{read,write}_bps_device file: a line
// "MAJ:MIN BYTES" per limited device. The kernel lists only devices with a limit.
func ParseV1Throttle(s string) (map[Device]uint64, error) {
	out := map[Device]uint64{}
	lines, err := throttleLines(s)
	if err != nil {
		return nil, err
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("throttle line %q: want \"MAJ:MIN BYTES\"", truncate(line))
		}
		d, err := ParseDevice(f[0])
		if err != nil {
			return nil, fmt.Errorf("throttle line %q: %w", truncate(line), err)
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("throttle line %q: want a byte count", truncate(line))
		}
		if _, dup := out[d]; dup {
			return nil, fmt.Errorf("throttle file names device %s twice", d)
		}
		if n != 0 && n != math.MaxUint64 {
			out[d] = n
		}
	}
	return out, nil
}

// ParseIOMax parses a cgroup v2 io.max file: a line "MAJ:MIN rbps=N wbps=N riops=N wiops=N" per
// device with any limit, "max" for none. It returns the bandwidth limits; IOPS limits, which
// finegrain never writes, are read and dropped. A device whose bandwidth is unlimited both ways
// is left out.
func ParseIOMax(s string) (IOLimits, error) {
	out := IOLimits{}
	lines, err := throttleLines(s)
	if err != nil {
		return nil, err
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("io.max line %q: want \"MAJ:MIN key=value...\"", truncate(line))
		}
		d, err := ParseDevice(f[0])
		if err != nil {
			return nil, fmt.Errorf("io.max line %q: %w", truncate(line), err)
		}
		if _, dup := out[d]; dup {
			return nil, fmt.Errorf("io.max names device %s twice", d)
		}
		var l IOLimit
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("io.max line %q: %q is not key=value", truncate(line), truncate(kv))
			}
			var n uint64
			if v != unlimitedV2String {
				if n, err = strconv.ParseUint(v, 10, 64); err != nil {
					return nil, fmt.Errorf("io.max line %q: %s=%q: want a number or max", truncate(line), truncate(k), truncate(v))
				}
			}
			switch k {
			case "rbps":
				l.ReadBPS = n
			case "wbps":
				l.WriteBPS = n
			case "riops", "wiops":
			default:
				return nil, fmt.Errorf("io.max line %q: unknown key %q", truncate(line), truncate(k))
			}
		}
		if l != (IOLimit{}) {
			out[d] = l
		}
	}
	return out, nil
}

func throttleLines(s string) ([]string, error) {
	var lines []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > maxIOLines {
		return nil, fmt.Errorf("throttle file has %d lines: more than %d devices", len(lines), maxIOLines)
	}
	return lines, nil
}

// ioV2Line spells one device's limit as the io.max write that sets it: "MAJ:MIN rbps=N wbps=N",
// where "max" removes a direction's limit (a line with no limit left disappears). v1 takes
// "MAJ:MIN BYTES" in one file per direction instead, 0 removing the rule (v1Line).
func ioV2Line(d Device, l IOLimit) string {
	num := func(n uint64) string {
		if n == 0 {
			return unlimitedV2String
		}
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprintf("%s rbps=%s wbps=%s", d, num(l.ReadBPS), num(l.WriteBPS))
}

// IODirs returns the cgroup directories that carry a pod's I/O limit: on cgroup v2 the pod's own
// cgroup, whose io.max holds everything below it; on cgroup v1 each of the given containers'
// cgroups in the blkio hierarchy, because v1 throttling is flat (a limit on the pod's cgroup
// would not hold the processes of its containers). An empty result on v1 means the pod has no
// known container yet.
func (l Layout) IODirs(pod PodRef, containers []ContainerID) ([]string, error) {
	if l.Mounts.Version == V2 {
		dir, err := l.PodDir(BlockIO, pod)
		if err != nil {
			return nil, err
		}
		return []string{dir}, nil
	}
	if l.Mounts.Root(BlockIO) == "" {
		return nil, fmt.Errorf("pod %s: no cgroup v1 blkio hierarchy is mounted: mount it to enforce I/O limits: %w", pod.UID, ErrControllerMissing)
	}
	var dirs []string
	for _, id := range containers {
		dir, err := l.ContainerDir(BlockIO, ContainerRef{Pod: pod, Container: id})
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// ApplyIO brings a pod's I/O limits on devs to want (the zero IOLimit removes them), writing
// only what differs, and reports the writes. Limits on other devices are left alone. On cgroup
// v1 it writes each of containers (IODirs); a container whose cgroup is gone is skipped. A pod
// whose cgroup is gone yields an error wrapping ErrVanished.
func (f *FS) ApplyIO(pod PodRef, containers []ContainerID, devs []Device, want IOLimit) (Result, error) {
	if err := pod.Validate(); err != nil {
		return Result{}, fmt.Errorf("pod I/O cgroup: %w", err)
	}
	if err := want.Validate(); err != nil {
		return Result{}, fmt.Errorf("pod %s: %w", pod.UID, err)
	}
	dirs, err := f.layout.IODirs(pod, containers)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, dir := range dirs {
		ws, err := f.planIO(pod, dir, devs, want)
		if errors.Is(err, ErrVanished) && f.layout.Mounts.Version == V1 {
			continue
		}
		if err != nil {
			return res, err
		}
		for _, w := range ws {
			if err := cgroups.WriteFile(w.Dir, w.File, w.New); err != nil {
				op := "write " + strconv.Quote(w.New) + " to"
				if errors.Is(err, syscall.ENODEV) && dirExists(w.Dir) {
					return res, fmt.Errorf("pod %s: %s %s: the kernel throttles only whole disks that exist (not partitions): %w", pod.UID, op, filepath.Join(w.Dir, w.File), err)
				}
				return res, f.ioError(pod, w.Dir, w.File, op, err)
			}
			f.log.Debug("cgroup write", "pod", string(pod.UID), "dir", w.Dir, "file", w.File, "old", w.Old, "new", w.New)
			res.Changes = append(res.Changes, w)
		}
	}
	return res, nil
}

// ReadIO returns the I/O limits one of a pod's IODirs carries.
func (f *FS) ReadIO(pod PodRef, dir string) (IOLimits, error) {
	if f.layout.Mounts.Version == V2 {
		raw, err := cgroups.ReadFile(dir, fileIOMax)
		if err != nil {
			return nil, f.ioError(pod, dir, fileIOMax, "read", err)
		}
		lim, err := ParseIOMax(raw)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %s in %s: %w", pod.UID, fileIOMax, dir, err)
		}
		return lim, nil
	}
	out := IOLimits{}
	for _, file := range []string{fileV1ReadBPS, fileV1WriteBPS} {
		raw, err := cgroups.ReadFile(dir, file)
		if err != nil {
			return nil, f.ioError(pod, dir, file, "read", err)
		}
		m, err := ParseV1Throttle(raw)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %s in %s: %w", pod.UID, file, dir, err)
		}
		for d, n := range m {
			l := out[d]
			if file == fileV1ReadBPS {
				l.ReadBPS = n
			} else {
				l.WriteBPS = n
			}
			out[d] = l
		}
	}
	return out, nil
}

// planIO reads one directory's limits and returns the writes that bring devs to want.
func (f *FS) planIO(pod PodRef, dir string, devs []Device, want IOLimit) ([]Write, error) {
	cur, err := f.ReadIO(pod, dir)
	if err != nil {
		return nil, err
	}
	devs = slices.Clone(devs)
	slices.SortFunc(devs, func(a, b Device) int {
		if a.Major != b.Major {
			return int(a.Major) - int(b.Major)
		}
		return int(a.Minor) - int(b.Minor)
	})
	devs = slices.Compact(devs)
	var ws []Write
	for _, d := range devs {
		have := cur[d]
		if have == want {
			continue
		}
		if f.layout.Mounts.Version == V2 {
			ws = append(ws, Write{Dir: dir, File: fileIOMax, Old: ioV2Line(d, have), New: ioV2Line(d, want)})
			continue
		}
		if have.ReadBPS != want.ReadBPS {
			ws = append(ws, Write{Dir: dir, File: fileV1ReadBPS, Old: v1Line(d, have.ReadBPS), New: v1Line(d, want.ReadBPS)})
		}
		if have.WriteBPS != want.WriteBPS {
			ws = append(ws, Write{Dir: dir, File: fileV1WriteBPS, Old: v1Line(d, have.WriteBPS), New: v1Line(d, want.WriteBPS)})
		}
	}
	return ws, nil
}

func v1Line(d Device, n uint64) string { return d.String() + " " + strconv.FormatUint(n, 10) }

// ioError names the pod and the file, and tells a vanished cgroup from a missing controller.
func (f *FS) ioError(pod PodRef, dir, file, op string, err error) error {
	path := filepath.Join(dir, file)
	if !isGone(err) {
		return fmt.Errorf("pod %s: %s %s: %w", pod.UID, op, path, err)
	}
	if dirExists(dir) {
		return fmt.Errorf("pod %s: %s %s: the cgroup exists but the file does not; mount the blkio controller (v1) or enable io in the parent's cgroup.subtree_control (v2): %w: %w", pod.UID, op, path, ErrControllerMissing, err)
	}
	return fmt.Errorf("pod %s: %s missing (the pod or container exited): %w", pod.UID, dir, ErrVanished)
}
