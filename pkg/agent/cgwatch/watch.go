// Package cgwatch owns noticing container cgroups as they appear and vanish below the kubelet's
// kubepods tree, through inotify on the hierarchy that carries the cpuset controller (the cpuset
// hierarchy on cgroup v1, the unified tree on v2). It watches the kubepods, QoS and pod
// directories, adds a watch to each new one and then scans it, so that a container created
// between the directory's creation and its watch is still reported. It reports only what the
// cgroup package's strict parser accepts as the kubelet's own names. It must not write cgroups,
// decide anything about the containers it reports, or follow anything outside the kubepods tree.
package cgwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Kind says what happened to a cgroup.
type Kind int

// Event kinds.
const (
	// Appeared: a container cgroup exists that may not have been reported before.
	Appeared Kind = iota + 1
	// Vanished: a container cgroup (Location level container) or a whole pod cgroup (level pod)
	// was removed.
	Vanished
	// Rescan: events were lost (the kernel's queue overflowed); the receiver must list the tree.
	Rescan
)

func (k Kind) String() string {
	switch k {
	case Appeared:
		return "appeared"
	case Vanished:
		return "vanished"
	case Rescan:
		return "rescan"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one change below kubepods.
type Event struct {
	Kind Kind
	Loc  cgroup.Location
	// Time is when the watcher learnt of the change.
	Time time.Time
	// Scanned is true when the cgroup was found by listing a directory rather than by an
	// inotify event, so Time may be later than its creation.
	Scanned bool
}

// The events watched on each directory: children created and removed, the directory itself
// removed, and the kernel's notice that a watch is gone.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// maxWatches bounds the directories watched (pods per node are limited to a few hundred).
const maxWatches = 65536

// Watcher reports container cgroups appearing and vanishing below kubepods.
type Watcher struct {
	layout cgroup.Layout
	root   string
	log    *slog.Logger
	events chan Event
	file   *os.File
	fd     int
	dirs   map[int32]string
	wds    map[string]int32
	// retry is how long Run waits between attempts to watch a kubepods directory that is missing.
	retry time.Duration
}

// New returns a watcher of layout's kubepods tree; Run starts it.
func New(layout cgroup.Layout, log *slog.Logger) *Watcher {
	return &Watcher{
		layout: layout,
		root:   layout.KubepodsDir(cgroup.CPUSet),
		log:    log,
		events: make(chan Event, 1024),
		dirs:   map[int32]string{},
		wds:    map[string]int32{},
		retry:  time.Second,
	}
}

// Events returns the channel Run reports on; it is closed when Run returns.
func (w *Watcher) Events() <-chan Event { return w.events }

// Run watches until ctx is done. It first reports every container already present (Scanned).
// When kubepods does not exist yet (the kubelet has not started) it waits for it.
func (w *Watcher) Run(ctx context.Context) error {
	defer close(w.events)
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("watch cgroups below %s: inotify_init1: %w", w.root, err)
	}
	w.fd = fd
	// Through os.File the descriptor joins Go's poller: Read blocks without a thread, and Close
	// from the context watcher below ends it.
	w.file = os.NewFile(uintptr(fd), "inotify")
	stop := context.AfterFunc(ctx, func() { w.file.Close() })
	defer stop()
	defer w.file.Close()

	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		for !w.watching(w.root) && !w.watchRoot(ctx) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(w.retry):
			}
		}
		n, err := w.file.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("watch cgroups below %s: read inotify events: %w", w.root, err)
		}
		now := time.Now()
		if err := w.handle(ctx, buf[:n], now); err != nil {
			return err
		}
	}
}

// watchRoot watches kubepods and scans it; false when it does not exist yet.
func (w *Watcher) watchRoot(ctx context.Context) bool {
	if err := w.add(w.root); err != nil {
		w.log.Warn("cannot watch kubepods yet; retrying", "dir", w.root, "reason", err.Error(), "retry", w.retry)
		return false
	}
	w.scan(ctx, w.root, time.Now())
	return true
}

// handle decodes a buffer of inotify events.
func (w *Watcher) handle(ctx context.Context, buf []byte, now time.Time) error {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(raw.Len)]
		off += unix.SizeofInotifyEvent + int(raw.Len)
		name := cString(nameBytes)
		mask := raw.Mask
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.log.Warn("inotify queue overflowed; rescanning kubepods", "dir", w.root)
			w.scan(ctx, w.root, now)
			w.send(ctx, Event{Kind: Rescan, Time: now})
			continue
		case mask&unix.IN_IGNORED != 0:
			w.forget(raw.Wd)
			continue
		}
		dir, ok := w.dirs[raw.Wd]
		if !ok || name == "" || mask&unix.IN_ISDIR == 0 {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case mask&unix.IN_CREATE != 0:
			w.created(ctx, path, now, false)
		case mask&unix.IN_DELETE != 0:
			w.deleted(ctx, path, now)
		}
	}
	return nil
}

// created handles a new directory: containers are reported, QoS and pod directories watched and
// then scanned for what was created before the watch existed.
func (w *Watcher) created(ctx context.Context, path string, now time.Time, scanned bool) {
	loc, err := w.layout.ParseDir(path)
	if err != nil {
		w.log.Debug("ignore cgroup", "dir", path, "reason", err.Error())
		return
	}
	switch loc.Level {
	case cgroup.LevelContainer:
		w.send(ctx, Event{Kind: Appeared, Loc: loc, Time: now, Scanned: scanned})
	case cgroup.LevelQOS, cgroup.LevelPod:
		if err := w.add(path); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				w.log.Warn("cannot watch cgroup directory", "dir", path, "reason", err.Error())
			}
			return
		}
		w.scan(ctx, path, now)
	}
}

func (w *Watcher) deleted(ctx context.Context, path string, now time.Time) {
	loc, err := w.layout.ParseDir(path)
	if err != nil {
		return
	}
	if loc.Level == cgroup.LevelContainer || loc.Level == cgroup.LevelPod {
		w.send(ctx, Event{Kind: Vanished, Loc: loc, Time: now})
	}
}

// scan reports what dir already holds.
func (w *Watcher) scan(ctx context.Context, dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("cannot list cgroup directory", "dir", dir, "reason", err.Error())
		}
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			w.created(ctx, filepath.Join(dir, e.Name()), now, true)
		}
	}
}

func (w *Watcher) add(dir string) error {
	if w.watching(dir) {
		return nil
	}
	if len(w.wds) >= maxWatches {
		return fmt.Errorf("watch %s: already watching %d directories", dir, maxWatches)
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.dirs[int32(wd)] = dir
	w.wds[dir] = int32(wd)
	return nil
}

func (w *Watcher) watching(dir string) bool {
	_, ok := w.wds[dir]
	return ok
}

// forget drops a watch the kernel removed (its directory is gone). When that was kubepods
// itself, Run waits for it to come back.
func (w *Watcher) forget(wd int32) {
	if dir, ok := w.dirs[wd]; ok {
		delete(w.wds, dir)
		delete(w.dirs, wd)
	}
}

func (w *Watcher) send(ctx context.Context, ev Event) {
	select {
	case w.events <- ev:
	case <-ctx.Done():
	}
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
