package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/ep"
	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/threads"
	"github.com/finegrain-dev/finegrain/bench/internal/worker"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// The test binary is fgworker itself when FGWORKER_TEST_MAIN is set, so the EP tests start
// real ranks without building anything.
func TestMain(m *testing.M) {
	if os.Getenv("FGWORKER_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func small(t *testing.T, mode string) worker.Options {
	t.Helper()
	o, _, err := parse(mode, []string{"-np", "2", "-n", "128", "-duration", "200ms",
		"-array", "500000", "-ntimes", "3", "-sample", "10ms"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FGWORKER_TEST_MAIN", "1")
	return o
}

// pinEachRank moves every thread of rank i to one CPU before release, as a cgroup writer would.
func pinEachRank(t *testing.T, cpus []int) worker.Placer {
	return func(procs []*ep.Proc) error {
		for _, p := range procs {
			var set unix.CPUSet
			set.Set(cpus[p.Rank%len(cpus)])
			entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.PID), "task"))
			if err != nil {
				return err
			}
			for _, e := range entries {
				tid, _ := strconv.Atoi(e.Name())
				if err := unix.SchedSetaffinity(tid, &set); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func TestEPRanksArePlacedThenTimed(t *testing.T) {
	allowed, err := threads.Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	cpus := allowed.List()
	for _, mode := range []string{worker.ModeDGEMM, worker.ModeSTREAM} {
		o := small(t, mode)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		run, err := worker.RunEP(context.Background(), os.Args[0], o, worker.Placement{Place: pinEachRank(t, cpus)}, os.Stderr, log)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if err := run.Validate(); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(run.Processes) != 2 || !(run.Total.Rate > 0) {
			t.Errorf("%s: %d processes, total rate %v", mode, len(run.Processes), run.Total.Rate)
		}
		for _, p := range run.Processes {
			want := strconv.Itoa(cpus[p.Rank%len(cpus)])
			if p.AffinityAtInit != allowed.String() || p.AffinityAtStart != want {
				t.Errorf("%s rank %d: affinity at init %q, at start %q; want %q then %q", mode, p.Rank, p.AffinityAtInit, p.AffinityAtStart, allowed, want)
			}
			ran, err := cpuset.Parse(p.RanOn)
			if err != nil || ran.IsEmpty() || !ran.IsSubsetOf(cpuset.New(cpus[p.Rank%len(cpus)])) {
				t.Errorf("%s rank %d pinned to CPU %s ran on %q", mode, p.Rank, want, p.RanOn)
			}
		}
		for _, name := range []string{"task-clock", "context-switches", "cpu-migrations", "page-faults"} {
			if c, ok := run.Total.Counter(name); !ok || c.Value == nil {
				t.Errorf("%s: software counter %s missing: %+v", mode, name, c)
			}
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, _, err := parse("noise", nil)
	if err != nil || o.Duration != 0 || o.NoiseBytes != 512<<20 {
		t.Errorf("noise defaults: duration %v, %d bytes, %v; want until stopped over 512 MiB", o.Duration, o.NoiseBytes, err)
	}
	o, _, err = parse("dgemm", []string{"-duration", "3s"})
	if err != nil || o.Duration != 3*time.Second || o.Procs != 1 || o.Output != "table" {
		t.Errorf("dgemm flags: %+v, %v", o, err)
	}
	if _, _, err := parse("dgemm", []string{"extra"}); err == nil {
		t.Error("a stray argument was accepted")
	}
	o, _, _ = parse("hpl", nil)
	if err := o.Validate(); err == nil {
		t.Error("unknown mode hpl validated")
	}
}

func TestChildArgsRoundTrip(t *testing.T) {
	o := small(t, worker.ModeSTREAM)
	args := worker.ChildArgs(o, 3)
	got, _, err := parse(args[0], args[1:])
	if err != nil {
		t.Fatal(err)
	}
	want := o
	want.Child, want.Rank = true, 3
	got.Procs, got.Output, got.NoiseThreads, got.NoiseBytes, got.ReadyTimeout = o.Procs, o.Output, o.NoiseThreads, o.NoiseBytes, o.ReadyTimeout
	if got != want {
		t.Errorf("rank options differ from the parent's:\n got %+v\nwant %+v", got, want)
	}
}

func TestNoiseRunsForDuration(t *testing.T) {
	o, _, err := parse("noise", []string{"-threads", "1", "-mem-mib", "8", "-duration", "100ms", "-o", "json"})
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	start := time.Now()
	err = worker.Main(context.Background(), o, nil, w, os.Stderr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 10*time.Second {
		t.Errorf("noise for 100ms took %v", d)
	}
	var res worker.NoiseResult
	if err := json.NewDecoder(r).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.Threads != 1 || res.Bytes != 8<<20 || !(res.GBs > 0) {
		t.Errorf("noise result %+v: want 1 thread over 8 MiB moving data", res)
	}
}

// TestLogOutput: with -o log an EP run writes exactly one result line, released at -start-at,
// and the noise writes its running totals every -report and once more at the end.
func TestLogOutput(t *testing.T) {
	start := time.Now().Add(300 * time.Millisecond).UTC()
	o, _, err := parse("dgemm", []string{"-np", "1", "-n", "64", "-duration", "50ms", "-sample", "10ms", "-o", "log",
		"-start-at", start.Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	if !o.StartAt.Equal(start) {
		t.Fatalf("-start-at parsed as %v, want %v", o.StartAt, start)
	}
	t.Setenv("FGWORKER_TEST_MAIN", "1")
	var out strings.Builder
	quietLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := worker.Main(context.Background(), o, nil, &out, os.Stderr, quietLog); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(start) {
		t.Error("the run finished before its start time")
	}
	lines, err := worker.ResultLines([]byte(out.String()), 1<<20)
	if err != nil || len(lines) != 1 || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("output %q: want one result line (%v)", out.String(), err)
	}
	run, err := result.Parse(strings.NewReader(string(lines[0])))
	if err != nil || len(run.Processes) != 1 {
		t.Fatalf("result line %s: %v", lines[0], err)
	}

	o, _, err = parse("noise", []string{"-threads", "1", "-mem-mib", "4", "-duration", "350ms", "-report", "100ms", "-o", "log"})
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	out.Reset()
	if err := worker.Main(context.Background(), o, nil, &out, os.Stderr, quietLog); err != nil {
		t.Fatal(err)
	}
	lines, err = worker.ResultLines([]byte(out.String()), 1<<20)
	if err != nil || len(lines) < 3 {
		t.Fatalf("noise output %q: want running totals and a final line (%v)", out.String(), err)
	}
	var last worker.NoiseResult
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
		t.Fatal(err)
	}
	if last.Seconds < 0.35 || !(last.GBs > 0) || last.Affinity == "" {
		t.Errorf("final noise totals %+v: want ≥ 0.35 s, traffic and the CPUs it could use", last)
	}
}

func TestParsePodFlags(t *testing.T) {
	if _, _, err := parse("dgemm", []string{"-start-at", "tomorrow"}); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("-start-at tomorrow: %v", err)
	}
	o, _, err := parse("stream", []string{"-await-cpus", "2", "-o", "log"})
	if err != nil || o.AwaitCPUs != 2 || o.Output != worker.OutputLog || o.Validate() != nil {
		t.Errorf("stream -await-cpus 2 -o log: %+v, %v, %v", o, err, o.Validate())
	}
	o, _, _ = parse("noise", []string{"-await-cpus", "1"})
	if err := o.Validate(); err == nil {
		t.Error("noise with -await-cpus validated")
	}
}
