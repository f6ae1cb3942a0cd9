package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

// procRoot is a fake /proc of a node whose init (PID 1) is in the root cgroups and one MPI
// worker container (status files from a Linux 6.18 host, fields edited; environ NUL-separated
// as the kernel shows it): sshd 4100, Open MPI's orted
// 4180, two Open MPI ranks 4242 and 4243, an MPICH-style rank 4300 with PMI_RANK and a secret
// in its environment, and 4301 whose rank variables are garbage.
var procRoot, _ = filepath.Abs(filepath.Join("testdata", "proc"))

var procs2to5 = cpuset.New(2, 3, 4, 5)

// worker returns every process of the fake /proc as Processes lists them.
func worker() map[int]Process {
	mems := cpuset.New(0)
	return map[int]Process{
		4100: {PID: 4100, Command: "sshd", CPUs: procs2to5, Mems: mems},
		4180: {PID: 4180, Command: "orted", CPUs: procs2to5, Mems: mems},
		4242: {PID: 4242, Command: "lmp", CPUs: procs2to5, Mems: mems, Rank: Rank{"OMPI_COMM_WORLD_RANK", 0}},
		4243: {PID: 4243, Command: "lmp", CPUs: procs2to5, Mems: mems, Rank: Rank{"OMPI_COMM_WORLD_RANK", 1}},
		4300: {PID: 4300, Command: "xhpl", CPUs: cpuset.New(4), Mems: mems, Rank: Rank{"PMI_RANK", 3}},
		4301: {PID: 4301, Command: "broken", CPUs: procs2to5, Mems: mems, Problem: "OMPI_COMM_WORLD_RANK: rank variable is not a rank number"},
	}
}

func pick(all map[int]Process, cgroup string, pids ...int) []Process {
	out := make([]Process, 0, len(pids))
	for _, pid := range pids {
		p := all[pid]
		p.Cgroup = cgroup
		out = append(out, p)
	}
	return out
}

func (fx *fixture) procReader() *ProcessReader {
	fx.t.Helper()
	r, err := NewProcessReader(fx.layout, procRoot)
	if err != nil {
		fx.t.Fatal(err)
	}
	return r
}

func TestProcessesOfAContainer(t *testing.T) {
	for _, tt := range []struct {
		v Version
		d Driver
	}{{V1, Cgroupfs}, {V1, Systemd}, {V2, Cgroupfs}, {V2, Systemd}} {
		t.Run(fmt.Sprintf("%s/%s", tt.v, tt.d), func(t *testing.T) {
			fx := newFixture(t, tt.v, tt.d)
			ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
			fx.addContainer(ref)
			dir := fx.dir(CPUSet, ref)
			// The kernel lists v2's cgroup.procs in no particular order.
			fx.set(dir, fileProcs, "4243\n4100\n4242\n4180")
			fx.mkCgroup(filepath.Join(dir, "ranks"), fx.hierarchies()[0])
			// A process that exited between the listing and the read is left out.
			fx.set(filepath.Join(dir, "ranks"), fileProcs, "4301\n4300\n4999")
			if tt.v == V1 {
				// Only the cpuset hierarchy is read: the cpu and memory ones list the same tasks.
				fx.set(fx.dir(CPU, ref), fileProcs, "1")
			}

			got, err := fx.procReader().Processes(ref, 100)
			if err != nil {
				t.Fatal(err)
			}
			all := worker()
			want := Processes{
				Container: ref, Dir: dir, Listed: 7, Limit: 100,
				Processes: append(pick(all, "", 4100, 4180, 4242, 4243), pick(all, "ranks", 4300, 4301)...),
			}
			if d := cmp.Diff(want, got, cpusetEqual); d != "" {
				t.Errorf("Processes (-want +got):\n%s", d)
			}
			if got.Truncated() {
				t.Error("Truncated with 7 processes and limit 100")
			}
		})
	}
}

func TestProcessesReportsNothingElseOfTheEnvironment(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	fx.set(fx.dir(CPUSet, ref), fileProcs, "4300")
	got, err := fx.procReader().Processes(ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%+v", got); strings.Contains(s, "do-not-report") || strings.Contains(s, "PMI_SIZE") || strings.Contains(s, "HOSTNAME") {
		t.Errorf("listing carries more of the environment than the rank: %s", s)
	}
}

// TestProcessesBounded lists a container of 20,002 processes: only the limit lowest PIDs are
// kept and read, the rest only counted.
func TestProcessesBounded(t *testing.T) {
	fx := newFixture(t, V2, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	fx.addContainer(ref)
	var b strings.Builder
	for pid := 25000; pid > 5000; pid-- {
		fmt.Fprintln(&b, pid)
		if pid == 20000 {
			fmt.Fprintln(&b, 4242)
			fmt.Fprintln(&b, 4100)
		}
	}
	fx.set(fx.dir(CPUSet, ref), fileProcs, strings.TrimSpace(b.String()))
	got, err := fx.procReader().Processes(ref, 3)
	if err != nil {
		t.Fatal(err)
	}
	// 5001 is the third lowest PID listed but has no /proc entry: it exited.
	want := Processes{Container: ref, Dir: fx.dir(CPUSet, ref), Listed: 20002, Limit: 3, Processes: pick(worker(), "", 4100, 4242)}
	if d := cmp.Diff(want, got, cpusetEqual); d != "" {
		t.Errorf("Processes (-want +got):\n%s", d)
	}
	if !got.Truncated() {
		t.Error("not Truncated with 20002 processes and limit 3")
	}
}

func TestProcessesErrors(t *testing.T) {
	fx := newFixture(t, V2, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	r := fx.procReader()
	if _, err := r.Processes(ref, 10); !errors.Is(err, ErrVanished) {
		t.Errorf("container without a cgroup: %v, want ErrVanished", err)
	}
	fx.addContainer(ref)
	dir := fx.dir(CPUSet, ref)
	for _, tt := range []struct {
		procs string
		limit int
		want  string
		is    error
	}{
		{"4100\n0\n", 10, "hostPID: true", ErrPIDNamespace},
		{"4100\nabc\n", 10, `line "abc" is not a PID`, nil},
		{"4100\n", 0, "process limit 0: want 1 to 4096", nil},
		{"4100\n", MaxProcessLimit + 1, "process limit 4097", nil},
	} {
		fx.set(dir, fileProcs, tt.procs)
		_, err := r.Processes(ref, tt.limit)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ref.String()) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("cgroup.procs %q, limit %d: %v; want an error naming the container and %q", tt.procs, tt.limit, err, tt.want)
		}
	}
	if _, err := r.Processes(ContainerRef{}, 10); !errors.Is(err, ErrInvalidID) {
		t.Errorf("zero ref: %v, want ErrInvalidID", err)
	}
	for i := range maxSubCgroups + 1 {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprint("s", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fx.set(dir, fileProcs, "4100")
	if _, err := r.Processes(ref, 10); err == nil || !strings.Contains(err.Error(), "sub-cgroups") {
		t.Errorf("%d sub-cgroups: %v, want a refusal", maxSubCgroups+1, err)
	}
	if _, err := NewProcessReader(fx.layout, "proc"); err == nil {
		t.Error("NewProcessReader accepted a relative proc root")
	}
}

// TestProcessesRefusesAPodPIDNamespace runs the reader as if inside a pod without hostPID:
// PID 1 of its /proc is the pod's own init, in a kubepods cgroup, and cgroup v1 would list
// none of the worker's processes.
func TestProcessesRefusesAPodPIDNamespace(t *testing.T) {
	for _, tt := range []struct {
		v    Version
		line string
	}{
		{V1, "4:memory:/kubepods/pod%[1]s/%[2]s\n3:cpuset:/kubepods/pod%[1]s/%[2]s\n"},
		{V2, "0::/kubepods/pod%[1]s/%[2]s\n"},
	} {
		t.Run(tt.v.String(), func(t *testing.T) {
			fx := newFixture(t, tt.v, Cgroupfs)
			ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
			fx.addContainer(ref)
			fx.set(fx.dir(CPUSet, ref), fileProcs, "")
			root := t.TempDir()
			if err := os.Mkdir(filepath.Join(root, "1"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "1", "cgroup"), fmt.Sprintf(tt.line, uidB, hexID2))
			r, err := NewProcessReader(fx.layout, root)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Processes(ref, 10); !errors.Is(err, ErrPIDNamespace) || !strings.Contains(err.Error(), "hostPID: true") {
				t.Errorf("Processes from a pod's PID namespace = %v, want ErrPIDNamespace asking for hostPID", err)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	real := readTestdata(t, "proc/4242/status")
	for _, tt := range []struct {
		name, status string
		want         string
	}{
		{"captured", real, "lmp 2-5 0"},
		{"escaped name", "Name:\tmy\\nproc\nCpus_allowed_list:\t0,2\nMems_allowed_list:\t0-1\n", `my\nproc 0,2 0-1`},
		{"long name cut", "Name:\t" + strings.Repeat("a", 100) + "\nCpus_allowed_list:\t0\nMems_allowed_list:\t0\n", strings.Repeat("a", maxCommandBytes) + " 0 0"},
		{"no lists", "Name:\tx\n", "error: no Name, Cpus_allowed_list or Mems_allowed_list line"},
		{"bad list", "Name:\tx\nCpus_allowed_list:\t3-1\nMems_allowed_list:\t0\n", `error: Cpus_allowed_list "3-1"`},
		{"line longer than the bound", "Name:\tx\nCpus_allowed_list:\t" + strings.Repeat("0,", maxStatusBytes) + "\n", "error: bufio.Scanner: token too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name, cpus, mems, err := parseStatus(strings.NewReader(tt.status))
			got := fmt.Sprintf("%s %s %s", name, cpus, mems)
			if err != nil {
				got = "error: " + err.Error()
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("parseStatus = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadProcessProblems(t *testing.T) {
	root := t.TempDir()
	writeProc := func(pid int, environ string) {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "status"), "Name:\tp\nCpus_allowed_list:\t1\nMems_allowed_list:\t0\n")
		if environ != "" {
			writeFile(t, filepath.Join(dir, "environ"), environ)
		}
	}
	writeProc(1, strings.Repeat("x", MaxEnvironBytes)+"\x00PMI_RANK=1\x00")
	writeProc(2, "")
	writeProc(3, "\x00")
	if err := os.Mkdir(filepath.Join(root, "4"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "4", "status"), "garbage")
	pr := procReader{root: root}
	for _, tt := range []struct {
		pid     int
		problem string
		err     string
	}{
		{1, "no rank variable in the first 256 KiB of a longer environment", ""},
		{2, "exited while read", ""},
		{3, "", ""},
		{4, "", "not a Linux /proc/<pid>/status file"},
	} {
		p, err := pr.read(tt.pid)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), fmt.Sprint("process ", tt.pid))):
			t.Errorf("process %d: %v, want an error naming it with %q", tt.pid, err, tt.err)
		case tt.err == "" && (err != nil || p.Problem != tt.problem):
			t.Errorf("process %d: problem %q, %v; want %q", tt.pid, p.Problem, err, tt.problem)
		}
	}
	if _, err := pr.read(5); !errors.Is(err, errExited) {
		t.Errorf("missing process: %v, want errExited", err)
	}
}

// BenchmarkProcesses lists a container of 20,000 processes with the agent's per-container
// bound: the cost is the cgroup.procs scan plus the reads of the few PIDs the fake /proc holds.
func BenchmarkProcesses(b *testing.B) {
	fx := newFixture(b, V2, Cgroupfs)
	ref := mustRef(b, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	var sb strings.Builder
	for pid := 24000; pid >= 4100; pid-- {
		fmt.Fprintln(&sb, pid)
	}
	fx.set(fx.dir(CPUSet, ref), fileProcs, strings.TrimSpace(sb.String()))
	r := fx.procReader()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Processes(ref, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
