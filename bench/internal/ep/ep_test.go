package ep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the child: TestMain runs the mode named in EP_TEST_CHILD.
func TestMain(m *testing.M) {
	switch os.Getenv("EP_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "ok":
		if err := Ready(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("result of %s at %d\n", os.Args[1], time.Now().UnixNano())
	case "crash":
		fmt.Fprintln(os.Stderr, "child: cannot allocate")
		os.Exit(3)
	case "chatter":
		fmt.Println("hello")
		os.Exit(0)
	case "hang":
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func spec(mode string, n int) Spec {
	return Spec{
		Path:         os.Args[0],
		Args:         func(rank int) []string { return []string{fmt.Sprintf("rank-%d", rank)} },
		Env:          []string{"EP_TEST_CHILD=" + mode},
		N:            n,
		Stderr:       os.Stderr,
		ReadyTimeout: 10 * time.Second,
	}
}

func TestStartReleaseCollect(t *testing.T) {
	procs, err := Start(context.Background(), spec("ok", 3))
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now().UnixNano()
	if err := Release(procs); err != nil {
		t.Fatal(err)
	}
	outs, err := Collect(procs)
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range outs {
		var rank string
		var at int64
		if _, err := fmt.Sscanf(string(out), "result of %s at %d", &rank, &at); err != nil {
			t.Fatalf("rank %d wrote %q: %v", i, out, err)
		}
		if rank != fmt.Sprintf("rank-%d", i) || procs[i].PID <= 0 {
			t.Errorf("output %d came from %s (pid %d)", i, rank, procs[i].PID)
		}
		if at < released {
			t.Errorf("rank %d produced its result before it was released", i)
		}
	}
}

func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		timeout    time.Duration
	}{
		{"crash", "exited: exit status 3", 10 * time.Second},
		{"chatter", `unexpected output "hello"`, 10 * time.Second},
		{"hang", "not ready after 200ms", 200 * time.Millisecond},
	} {
		s := spec(tc.mode, 2)
		s.ReadyTimeout = tc.timeout
		procs, err := Start(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.mode, err, tc.want)
		}
		if procs != nil {
			t.Errorf("%s: Start returned processes with its error", tc.mode)
		}
	}
}

func TestReadyNeedsGo(t *testing.T) {
	var out strings.Builder
	if err := Ready(&out, strings.NewReader("go\n")); err != nil || out.String() != readyLine+"\n" {
		t.Errorf("Ready = %v, wrote %q", err, out.String())
	}
	if err := Ready(&out, strings.NewReader("")); err == nil {
		t.Error("Ready went ahead although the parent closed stdin without saying go")
	}
	if err := Ready(&out, strings.NewReader("stop\n")); err == nil || !strings.Contains(err.Error(), `"stop"`) {
		t.Errorf("Ready on a wrong line: %v", err)
	}
}

// cgroup2Mount returns the mount point of a cgroup2 file system, or skips: hybrid hosts mount
// one without controllers, which is enough to create processes in.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creates a cgroup: needs root")
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" && f[3] == "/" {
			return f[4]
		}
	}
	t.Skip("no cgroup2 file system mounted")
	return ""
}

// cgroupOf returns the cgroup v2 path of pid (the "0::" line of /proc/PID/cgroup).
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "0::"); ok {
			return v
		}
	}
	t.Fatalf("pid %d has no cgroup v2 line in %q", pid, b)
	return ""
}

// TestStartInCgroup creates ranks directly in a cgroup v2 directory of the real kernel (clone3
// with CLONE_INTO_CGROUP) and one in the parent's cgroup.
func TestStartInCgroup(t *testing.T) {
	mount := cgroup2Mount(t)
	name := fmt.Sprintf("finegrain-ep-test-%d", os.Getpid())
	dir := mount + "/" + name
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup %s: %v", dir, err)
	}
	defer func() {
		for range 50 {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("cgroup %s left behind", dir)
	}()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := spec("ok", 2)
	s.CgroupFD = func(rank int) int {
		if rank == 0 {
			return int(f.Fd())
		}
		return -1
	}
	procs, err := Start(context.Background(), s)
	if err != nil {
		if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG) {
			t.Skipf("the kernel lacks clone3 with CLONE_INTO_CGROUP (Linux 5.7): %v", err)
		}
		t.Fatal(err)
	}
	own := cgroupOf(t, os.Getpid())
	if got := cgroupOf(t, procs[0].PID); got != "/"+name {
		t.Errorf("rank 0 was created in cgroup %q, want /%s", got, name)
	}
	if got := cgroupOf(t, procs[1].PID); got != own {
		t.Errorf("rank 1 (no descriptor) is in cgroup %q, want the parent's %q", got, own)
	}
	if err := Release(procs); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(procs); err != nil {
		t.Fatal(err)
	}
}

// TestStartInCgroupBadDescriptor: a descriptor that is no cgroup directory fails the start,
// naming the rank and the descriptor, and leaves no process behind.
func TestStartInCgroupBadDescriptor(t *testing.T) {
	cgroup2Mount(t)
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := spec("ok", 2)
	s.CgroupFD = func(int) int { return int(f.Fd()) }
	procs, err := Start(context.Background(), s)
	if err == nil {
		Kill(procs)
		t.Fatal("ranks started in a regular file's descriptor")
	}
	if want := fmt.Sprintf("start rank 0 (%s) in the cgroup of descriptor %d", os.Args[0], f.Fd()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}
