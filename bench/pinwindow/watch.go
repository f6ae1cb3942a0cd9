package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// recorder watches the kubepods tree of the cpuset hierarchy on its own, independently of the
// agent, and records for every container cgroup when its directory appeared and every value its
// cpuset.cpus took (read as each write's inotify event arrives). The unpinned window of a
// container is the time from its directory's creation to the first value equal to its pin.
type recorder struct {
	layout cgroup.Layout
	fd     int
	// realtime receives, once run has started, why its thread could not get real-time priority
	// (nil when it did).
	realtime chan error

	mu   sync.Mutex
	dirs map[int32]string
	ctrs map[string]*ctrRecord
}

// ctrRecord is what the recorder saw of one container cgroup.
type ctrRecord struct {
	created time.Time
	values  []timedValue
}

type timedValue struct {
	at   time.Time
	cpus string
}

const (
	treeMask      = unix.IN_CREATE | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	containerMask = unix.IN_MODIFY | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	cpusFile      = "cpuset.cpus"
)

func newRecorder(layout cgroup.Layout) (*recorder, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	r := &recorder{layout: layout, fd: fd, dirs: map[int32]string{}, ctrs: map[string]*ctrRecord{}, realtime: make(chan error, 1)}
	top := layout.KubepodsDir(cgroup.CPUSet)
	if err := r.watchTree(top, time.Now()); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

// fifoPriority is the real-time priority of the recorder's thread: it must read an event as
// soon as the kernel queues it, ahead of everything else on a busy node, or it would see a
// directory's creation late and under-measure the window. It blocks in the kernel between events.
const fifoPriority = 50

// run reads events until ctx ends, on a thread of its own that the kernel wakes directly (a
// blocking poll, not Go's network poller) and, when permitted, with real-time priority.
func (r *recorder) run(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer unix.Close(r.fd)
	r.realtime <- unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: fifoPriority}, 0)
	buf := make([]byte, 256*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll inotify: %w", err)
		}
		if n == 0 || err != nil {
			continue
		}
		n, err = unix.Read(r.fd, buf)
		now := time.Now()
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("read inotify events: %w", err)
		}
		if err := r.handle(buf[:n], now); err != nil {
			return err
		}
	}
	return nil
}

// handle processes one buffer of events.
func (r *recorder) handle(buf []byte, now time.Time) error {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		name := strings.TrimRight(string(raw), "\x00")
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return errors.New("inotify queue overflowed: the measurement lost events")
		}
		r.mu.Lock()
		dir, ok := r.dirs[ev.Wd]
		r.mu.Unlock()
		if !ok || name == "" {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case ev.Mask&unix.IN_CREATE != 0 && ev.Mask&unix.IN_ISDIR != 0:
			if err := r.watchTree(path, now); err != nil {
				return err
			}
		case ev.Mask&unix.IN_MODIFY != 0 && name == cpusFile:
			r.read(dir, now)
		}
	}
	return nil
}

// watchTree starts watching a new kubepods, QoS, pod or container directory and reports what it
// already holds.
func (r *recorder) watchTree(dir string, now time.Time) error {
	loc, err := r.layout.ParseDir(dir)
	if err != nil {
		return nil
	}
	mask := uint32(treeMask)
	if loc.Level == cgroup.LevelContainer {
		mask = containerMask
		r.mu.Lock()
		if _, ok := r.ctrs[dir]; !ok {
			r.ctrs[dir] = &ctrRecord{created: now}
		}
		r.mu.Unlock()
	}
	wd, err := unix.InotifyAddWatch(r.fd, dir, mask)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	r.mu.Lock()
	r.dirs[int32(wd)] = dir
	r.mu.Unlock()
	if loc.Level == cgroup.LevelContainer {
		r.read(dir, time.Now())
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := r.watchTree(filepath.Join(dir, e.Name()), now); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *recorder) read(dir string, at time.Time) {
	data, err := os.ReadFile(filepath.Join(dir, cpusFile))
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.ctrs[dir]; c != nil {
		c.values = append(c.values, timedValue{at: at, cpus: strings.TrimSpace(string(data))})
	}
}

// firstEqual returns when the container's cpuset.cpus first read want, measured from its
// creation (window), and the time of that reading.
func (r *recorder) firstEqual(dir, want string) (window time.Duration, at time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ctrs[dir]
	if c == nil {
		return 0, time.Time{}, false
	}
	for _, v := range c.values {
		if v.cpus == want {
			return v.at.Sub(c.created), v.at, true
		}
	}
	return 0, time.Time{}, false
}

// firstEqualAfter returns the first time after t that the container's cpuset.cpus read want.
func (r *recorder) firstEqualAfter(dir, want string, t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ctrs[dir]
	if c == nil {
		return time.Time{}, false
	}
	for _, v := range c.values {
		if v.cpus == want && !v.at.Before(t) {
			return v.at, true
		}
	}
	return time.Time{}, false
}

// forget drops a container's record.
func (r *recorder) forget(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ctrs, dir)
	for wd, d := range r.dirs {
		if strings.HasPrefix(d, dir) {
			delete(r.dirs, wd)
		}
	}
}
