package cgwatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

const (
	uid1 = "11111111-2222-3333-4444-555555555555"
	uid2 = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	id1  = "1111111111111111111111111111111111111111111111111111111111111111"
	id2  = "2222222222222222222222222222222222222222222222222222222222222222"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// tree is a kubepods tree the test creates directories in: a plain directory tree, or a real
// cgroup v1 cpuset hierarchy below a base the test owns.
type tree struct {
	t      *testing.T
	layout cgroup.Layout
	top    string
}

func newDirTree(t *testing.T) *tree {
	root := t.TempDir()
	m := cgroup.Mounts{Version: cgroup.V1, V1: map[cgroup.Controller]string{}}
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		m.V1[c] = filepath.Join(root, string(c))
	}
	l, err := cgroup.NewLayout(m, cgroup.Cgroupfs, "")
	if err != nil {
		t.Fatal(err)
	}
	return &tree{t: t, layout: l, top: l.KubepodsDir(cgroup.CPUSet)}
}

func (tr *tree) mkdir(rel string) {
	tr.t.Helper()
	if err := os.Mkdir(filepath.Join(tr.top, rel), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) rmdir(rel string) {
	tr.t.Helper()
	if err := os.Remove(filepath.Join(tr.top, rel)); err != nil {
		tr.t.Fatal(err)
	}
}

func start(t *testing.T, tr *tree) (*Watcher, context.CancelFunc, chan error) {
	w := New(tr.layout, quiet)
	w.retry = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return w, cancel, done
}

// next waits for the next event that is not a duplicate of one already seen.
func next(t *testing.T, w *Watcher, seen map[string]bool) Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatal("events closed")
			}
			key := fmt.Sprintf("%s %d %s %s", ev.Kind, ev.Loc.Level, ev.Loc.Pod, ev.Loc.Container.ID)
			if seen[key] {
				continue
			}
			seen[key] = true
			return ev
		case <-timeout:
			t.Fatal("no event within 5 s")
		}
	}
}

func expect(t *testing.T, ev Event, kind Kind, level cgroup.Level, pod, ctr string) {
	t.Helper()
	if ev.Kind != kind || ev.Loc.Level != level || string(ev.Loc.Pod) != pod || ev.Loc.Container.ID != ctr {
		t.Fatalf("event = %s level %d pod %q container %q, want %s level %d pod %q container %q",
			ev.Kind, ev.Loc.Level, ev.Loc.Pod, ev.Loc.Container.ID, kind, level, pod, ctr)
	}
}

func testLifecycle(t *testing.T, tr *tree) {
	// Present before the watcher starts: reported by the initial scan.
	tr.mkdir("burstable")
	tr.mkdir("besteffort")
	tr.mkdir("burstable/pod" + uid1)
	tr.mkdir("burstable/pod" + uid1 + "/" + id1)
	w, _, _ := start(t, tr)
	seen := map[string]bool{}
	ev := next(t, w, seen)
	expect(t, ev, Appeared, cgroup.LevelContainer, uid1, id1)
	if !ev.Scanned || ev.Loc.QOS != cgroup.Burstable {
		t.Errorf("initial event scanned %v qos %s, want a scanned burstable container", ev.Scanned, ev.Loc.QOS)
	}

	// A Guaranteed pod and its container created while watching: the container is reported
	// whether it was made before or after the pod directory's watch.
	tr.mkdir("pod" + uid2)
	tr.mkdir("pod" + uid2 + "/" + id2)
	expect(t, next(t, w, seen), Appeared, cgroup.LevelContainer, uid2, id2)

	// Names the kubelet never makes are not reported.
	tr.mkdir("pod" + uid2 + "/not-a-container")
	tr.mkdir("burstable/pod" + uid1 + "/" + id2)
	ev = next(t, w, seen)
	expect(t, ev, Appeared, cgroup.LevelContainer, uid1, id2)
	if ev.Scanned {
		t.Error("a container created under a watched pod was reported as scanned")
	}

	tr.rmdir("burstable/pod" + uid1 + "/" + id2)
	expect(t, next(t, w, seen), Vanished, cgroup.LevelContainer, uid1, id2)
	tr.rmdir("pod" + uid2 + "/" + id2)
	expect(t, next(t, w, seen), Vanished, cgroup.LevelContainer, uid2, id2)
	tr.rmdir("pod" + uid2 + "/not-a-container")
	tr.rmdir("pod" + uid2)
	expect(t, next(t, w, seen), Vanished, cgroup.LevelPod, uid2, "")
}

func TestWatcherDirTree(t *testing.T) {
	tr := newDirTree(t)
	if err := os.MkdirAll(tr.top, 0o755); err != nil {
		t.Fatal(err)
	}
	testLifecycle(t, tr)
}

// TestWatcherWaitsForKubepods starts before the kubelet made kubepods.
func TestWatcherWaitsForKubepods(t *testing.T) {
	tr := newDirTree(t)
	w, _, _ := start(t, tr)
	time.Sleep(30 * time.Millisecond)
	if err := os.MkdirAll(filepath.Join(tr.top, "pod"+uid1, id1), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, w, map[string]bool{}), Appeared, cgroup.LevelContainer, uid1, id1)
}

// TestWatcherRealCgroup runs the lifecycle on the kernel's cgroup v1 cpuset hierarchy, where
// directories are cgroups the kernel fills with interface files.
func TestWatcherRealCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil || m.Version != cgroup.V1 {
		t.Skipf("needs a cgroup v1 cpuset hierarchy (mounts: %+v, %v)", m, err)
	}
	base := fmt.Sprintf("finegrain-cgwatch-test-%d", os.Getpid())
	l, err := cgroup.NewLayout(m, cgroup.Cgroupfs, base)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tree{t: t, layout: l, top: l.KubepodsDir(cgroup.CPUSet)}
	if err := os.MkdirAll(tr.top, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Cgroups are removed bottom-up with rmdir (RemoveAll would try to unlink their files).
		var dirs []string
		filepath.WalkDir(filepath.Join(m.Root(cgroup.CPUSet), base), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	})
	testLifecycle(t, tr)
}
