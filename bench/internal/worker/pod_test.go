package worker

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/bench/internal/ep"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestResultLines(t *testing.T) {
	log := "time=1 level=INFO msg=\"noise running\"\n" +
		LogPrefix + `{"a":1}` + "\n" +
		"fgworker-resultless line\n" +
		"  " + LogPrefix + `{"indented":true}` + "\n" +
		LogPrefix + `{"a":2}`
	got, err := ResultLines([]byte(log), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != `{"a":1}` || string(got[1]) != `{"a":2}` {
		t.Errorf("result lines %q, want the two prefixed at the start of a line", got)
	}
	if _, err := ResultLines([]byte(LogPrefix+strings.Repeat("x", 100)), 64); err == nil {
		t.Error("a result line longer than the limit was accepted")
	}
}

// sleeper starts a real process to wait for, standing in for a rank.
func sleeper(t *testing.T) *ep.Proc {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &ep.Proc{Rank: 0, PID: cmd.Process.Pid}
}

// TestAwaitCPUsSeesALatePin: the parent releases nothing until the rank's affinity shrinks to
// the pinned count, as when a node agent pins a container shortly after it started.
func TestAwaitCPUsSeesALatePin(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a pinned rank from a floating one")
	}
	p := sleeper(t)
	pinAt := time.Now().Add(100 * time.Millisecond)
	go func() {
		time.Sleep(time.Until(pinAt))
		var one unix.CPUSet
		one.Set(0)
		_ = unix.SchedSetaffinity(p.PID, &one)
	}()
	if err := awaitCPUs(context.Background(), []*ep.Proc{p}, 1, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(pinAt) {
		t.Error("awaitCPUs returned before the rank was pinned")
	}
}

func TestAwaitCPUsTimesOut(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a pinned rank from a floating one")
	}
	p := sleeper(t)
	err := awaitCPUs(context.Background(), []*ep.Proc{p}, 1, time.Now().Add(50*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "not on 1 CPUs: its container was not pinned in time") {
		t.Errorf("got %v, want a timeout naming the pin", err)
	}
}

func TestReleaseWhenPlacedWaitsForTheStartTime(t *testing.T) {
	p := sleeper(t)
	o := Options{ReadyTimeout: time.Second, StartAt: time.Now().Add(150 * time.Millisecond)}
	if err := releaseWhenPlaced(context.Background(), o, quiet)([]*ep.Proc{p}); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(o.StartAt) {
		t.Error("ranks released before the start time")
	}
	o.StartAt = time.Now().Add(-time.Second)
	err := releaseWhenPlaced(context.Background(), o, quiet)([]*ep.Proc{p})
	if err == nil || !strings.Contains(err.Error(), "after the start time") {
		t.Errorf("a start time in the past: got %v, want an error saying the ranks are late", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.StartAt = time.Now().Add(time.Minute)
	if err := releaseWhenPlaced(ctx, o, quiet)([]*ep.Proc{p}); err == nil {
		t.Error("a cancelled wait for the start time went ahead")
	}
}
