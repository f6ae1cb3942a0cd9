package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

func TestWithMode(t *testing.T) {
	args := []string{"--cgroup-driver=cgroupfs", "--inotify=true", "--cri-endpoint=unix:///x.sock", "--reconcile-interval=500ms", "--nri=auto", "--nri-socket=/x"}
	got := withMode(args, modeInformer, criEndpoint(args))
	want := []string{"--cgroup-driver=cgroupfs", "--reconcile-interval=500ms", "--nri-socket=/x", "--nri=off", "--inotify=false", "--cri-endpoint="}
	if !slices.Equal(got, want) {
		t.Errorf("informer args = %q, want %q", got, want)
	}
	if got := withMode(got, modeInotify, criEndpoint(args)); !slices.Contains(got, "--cri-endpoint=unix:///x.sock") || !slices.Contains(got, "--inotify=true") {
		t.Errorf("inotify args = %q", got)
	}
	if !slices.Equal(args, []string{"--cgroup-driver=cgroupfs", "--inotify=true", "--cri-endpoint=unix:///x.sock", "--reconcile-interval=500ms", "--nri=auto", "--nri-socket=/x"}) {
		t.Error("withMode changed its input")
	}
}

func TestParse(t *testing.T) {
	o, err := parse([]string{"-modes", "informer", "-pods", "5"}, io.Discard)
	if err != nil || !slices.Equal(o.modes, []mode{modeInformer}) || o.pods != 5 {
		t.Errorf("parse = %+v, %v", o, err)
	}
	for _, args := range [][]string{{"-modes", "nri"}, {"-pods", "0"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) = nil error", args)
		}
	}
}

func TestReadUsageSelf(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil || u.rss <= 0 {
		t.Fatalf("readUsage(self) = %+v, %v", u, err)
	}
}

// TestRecorder watches a directory tree laid out like kubepods: a container's creation and the
// values written to its cpuset.cpus are recorded in order.
func TestRecorder(t *testing.T) {
	root := t.TempDir()
	m := cgroup.Mounts{Version: cgroup.V1, V1: map[cgroup.Controller]string{}}
	for _, c := range []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory} {
		m.V1[c] = filepath.Join(root, string(c))
	}
	layout, err := cgroup.NewLayout(m, cgroup.Cgroupfs, "")
	if err != nil {
		t.Fatal(err)
	}
	top := layout.KubepodsDir(cgroup.CPUSet)
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := newRecorder(layout)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	pod := filepath.Join(top, "pod11111111-2222-3333-4444-555555555555")
	ctr := filepath.Join(pod, strings.Repeat("a", 64))
	if err := os.Mkdir(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0-3", "2"} {
		time.Sleep(20 * time.Millisecond)
		if err := os.WriteFile(filepath.Join(ctr, cpusFile), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if w, _, ok := rec.firstEqual(ctr, "2"); ok {
			if w < 20*time.Millisecond {
				t.Errorf("window %s, want at least the 40 ms the test waited", w)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder never read the pin")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := rec.firstEqualAfter(ctr, "2", time.Now().Add(time.Hour)); ok {
		t.Error("firstEqualAfter found a value in the future")
	}
}
