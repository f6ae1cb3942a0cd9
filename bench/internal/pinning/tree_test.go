package pinning

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/threads"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// requireCgroups skips unless the test runs as root on a host with the cpuset, cpu and memory
// controllers mounted.
func requireCgroups(t *testing.T) cgroup.Mounts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creates cgroups: needs root")
	}
	m, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no usable cpuset/cpu/memory cgroup hierarchies here: %v", err)
	}
	return m
}

func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for pid %d", pid)
	return ""
}

func TestTreePinsAndLimitsRealProcesses(t *testing.T) {
	mounts := requireCgroups(t)
	base := "finegrain-bench-test-" + strconv.Itoa(os.Getpid())
	tr, err := newTree(mounts, base, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(mounts.Root(cgroup.CPUSet), base)); !os.IsNotExist(err) {
			t.Errorf("bench tree %s left behind: %v", base, err)
		}
	}()
	allowed, err := threads.Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	pinTo := cpuset.New(allowed.List()[allowed.Size()-1])

	rank, err := tr.addContainer(cgroup.Guaranteed)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.apply(rank, cgroup.Resources{CPUs: pinTo, Mems: cpuset.New(0)}); err != nil {
		t.Fatal(err)
	}
	noise, err := tr.addContainer(cgroup.Burstable)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.apply(noise, cgroup.Resources{CPUQuota: cgroup.Quota{QuotaUS: 50000, PeriodUS: 100000}}); err != nil {
		t.Fatal(err)
	}

	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	mark := len(tr.created)
	if err := tr.attach(rank, sleep.Process.Pid, rankControllers...); err != nil {
		t.Fatal(err)
	}
	if got := cpusAllowed(t, sleep.Process.Pid); got != pinTo.String() {
		t.Errorf("process in the rank cgroup may run on %s, want %s", got, pinTo)
	}
	dir, err := tr.layout.ContainerDir(cgroup.CPU, noise)
	if err != nil {
		t.Fatal(err)
	}
	file, want := "cpu.cfs_quota_us", "50000"
	if mounts.Version == cgroup.V2 {
		file, want = "cpu.max", "50000 100000"
	}
	if got, err := cgroups.ReadFile(dir, file); err != nil || strings.TrimSpace(got) != want {
		t.Errorf("neighbour %s/%s = %q, %v; want %q", dir, file, got, err, want)
	}
	if mark != len(tr.created) {
		t.Errorf("attach created cgroups")
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
}

// TestMeasureEndToEnd builds fgworker and runs every scenario once with tiny sizes on this
// machine's real cgroups.
func TestMeasureEndToEnd(t *testing.T) {
	requireCgroups(t)
	if testing.Short() {
		t.Skip("builds fgworker and runs every scenario: skipped with -short")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	bin := filepath.Join(t.TempDir(), "fgworker")
	build := exec.Command(gobin, "build", "-o", bin, "github.com/finegrain-dev/finegrain/bench/worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fgworker: %v\n%s", err, out)
	}
	o := Options{
		Worker: bin, Scenarios: AllScenarios, Benchmarks: AllBenchmarks, Repeats: 1,
		N: 128, Duration: 200 * time.Millisecond, ArrayLen: 500_000, NTimes: 3,
		NoiseThreads: 2, NoiseMiB: 16, NoiseCPUs: 0.5, NoiseWarmup: 100 * time.Millisecond,
		SysfsRoot: "/sys", ProcRoot: "/proc", Mountinfo: "/proc/self/mountinfo",
		OutDir: t.TempDir(), Output: "json",
	}
	samples, err := Measure(context.Background(), o, os.Stderr, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(AllScenarios)*len(AllBenchmarks) {
		t.Fatalf("%d samples, want one per scenario and benchmark", len(samples))
	}
	for _, s := range samples {
		if err := s.Run.Validate(); err != nil {
			t.Errorf("%s/%s: %v", s.Scenario, s.Benchmark, err)
		}
		if (s.Noise != nil) != (s.Scenario != Alone) {
			t.Errorf("%s/%s: neighbour result %+v", s.Scenario, s.Benchmark, s.Noise)
		}
		if s.Ranks == "floating" {
			continue
		}
		pinned, err := cpuset.Parse(s.Ranks)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.Run.Processes {
			ran, err := cpuset.Parse(p.RanOn)
			if err != nil || p.AffinityAtStart != s.Ranks || !ran.IsSubsetOf(pinned) {
				t.Errorf("%s/%s rank %d: pinned to %s, affinity at start %s, ran on %s", s.Scenario, s.Benchmark, p.Rank, s.Ranks, p.AffinityAtStart, p.RanOn)
			}
		}
	}
	var out strings.Builder
	if err := Report(samples, o, Context{Command: "test", CPUs: runtime.NumCPU(), Ranks: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"scenario": "kubelet-static"`) || !strings.Contains(out.String(), `"ratioToAlone"`) {
		t.Errorf("JSON rows lack scenarios or ratios:\n%s", out.String())
	}
	for _, f := range []string{"pinning.md", "pinning.json", "samples.json", "dgemm.png", "stream.png"} {
		if _, err := os.Stat(filepath.Join(o.OutDir, f)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
}

func TestCloneIntoCgroup(t *testing.T) {
	for _, tc := range []struct {
		v       cgroup.Version
		release string
		want    bool
	}{
		{cgroup.V2, "5.7.0", true},
		{cgroup.V2, "6.1.0-28-amd64", true},
		{cgroup.V2, "6.18.44-fc-v657", true},
		{cgroup.V2, "5.6.19", false},
		{cgroup.V2, "4.19.0", false},
		{cgroup.V2, "", false},
		{cgroup.V2, "garbage", false},
		{cgroup.V1, "6.18.0", false},
	} {
		if got := cloneIntoCgroup(tc.v, tc.release); got != tc.want {
			t.Errorf("cgroup v%d, kernel %q: clone into cgroup %v, want %v", tc.v, tc.release, got, tc.want)
		}
	}
}

func TestCheckPlaced(t *testing.T) {
	l := layout{groups: []group{{cpus: cpuset.New(1), ranks: []int{0}}, {cpus: cpuset.New(2, 3), ranks: []int{1}}}}
	run := func(init0, start0 string) result.Run {
		return result.Run{Processes: []result.Process{
			{Rank: 0, PID: 10, AffinityAtInit: init0, AffinityAtStart: start0},
			{Rank: 1, PID: 11, AffinityAtInit: "2-3", AffinityAtStart: "2-3"},
		}}
	}
	for _, tc := range []struct {
		name        string
		run         result.Run
		created     bool
		wantErrPart string
	}{
		{"moved before release", run("0-3", "1"), false, ""},
		{"created in cgroup", run("1", "1"), true, ""},
		{"not moved", run("0-3", "0-3"), false, "started timing on CPUs 0-3"},
		{"created elsewhere", run("0-3", "1"), true, "first instruction could run on CPUs 0-3"},
		{"missing rank", result.Run{Processes: []result.Process{{Rank: 1, AffinityAtStart: "2-3", AffinityAtInit: "2-3"}}}, false, "rank 0 of the group on CPUs 1 reported no result"},
	} {
		err := checkPlaced(l, tc.run, tc.created)
		if tc.wantErrPart == "" && err != nil || tc.wantErrPart != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrPart)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.wantErrPart)
		}
	}
}
