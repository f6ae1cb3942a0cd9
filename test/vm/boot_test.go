package vm

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// EnvBootTests enables the tests below, which boot real qemu guests for several seconds of
// emulation each; `make test-vm` sets it.
const EnvBootTests = "FINEGRAIN_VM_BOOT_TESTS"

type bootHost struct {
	qemu, busybox string
	kernel        Kernel
}

func requireBoot(t *testing.T) bootHost {
	t.Helper()
	if os.Getenv(EnvBootTests) == "" {
		t.Skipf("boots qemu guests; `make test-vm` runs it with %s=1", EnvBootTests)
	}
	q, err := findQEMU("")
	if err != nil {
		t.Skip(err)
	}
	if err := checkBusybox("/bin/busybox"); err != nil {
		t.Skip(err)
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Skip(err)
	}
	k, ok := newestCached(cache, "")
	if !ok {
		t.Skipf("no guest kernel cached under %s; `make test-vm` fetches one first", cache)
	}
	return bootHost{qemu: q, busybox: "/bin/busybox", kernel: k}
}

// busyboxJobs makes one job per busybox applet: /finegrain/bin/<applet> is busybox itself, which
// runs the applet its name says.
func busyboxJobs(h bootHost, srcDir string, applets ...[]string) (Config, map[jobKey]guestBinary) {
	cfg := Config{
		Name:    "boot-test",
		Machine: Machine{Sockets: 1, CoresPerSocket: 2, ThreadsPerCore: 1, Nodes: []Node{{CPUs: "0-1", MemoryMiB: 256}}},
		Cgroup:  CgroupV2,
	}
	bins := map[jobKey]guestBinary{}
	for _, a := range applets {
		j := Job{Package: "./" + a[0], Program: true, Args: a[1:]}
		cfg.Jobs = append(cfg.Jobs, j)
		bins[jobKey{j.Package, true}] = guestBinary{job: j, host: h.busybox, name: a[0], srcDir: srcDir}
	}
	return cfg, bins
}

func TestBootReportsEveryJob(t *testing.T) {
	h := requireBoot(t)
	work := t.TempDir()
	cfg, bins := busyboxJobs(h, work, []string{"echo", "hello from the guest"}, []string{"false"}, []string{"sh", "-c", "echo $FINEGRAIN_VM; exit 7"})
	var console bytes.Buffer
	r := Runner{Busybox: h.busybox, Attempts: 2, BootTimeout: 2 * time.Minute, TestTimeout: time.Minute, Console: &console, Log: slog.New(slog.DiscardHandler)}
	res, err := r.runConfig(context.Background(), qemu{path: h.qemu, accel: AccelTCG, kernel: h.kernel.Vmlinux}, cfg, bins, work)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 1 {
		t.Errorf("%d attempts, want 1 (a failing job is no reason to boot again)", len(res.Attempts))
	}
	last := res.Last()
	if last.Err != nil {
		t.Fatalf("boot: %v\n%s", last.Err, last.Console)
	}
	var got []string
	for _, j := range last.Jobs {
		got = append(got, strings.Join([]string{j.Job.Package, strings.TrimSpace(j.Output), strconv.Itoa(j.ExitCode)}, "|"))
	}
	want := []string{"./echo|hello from the guest|0", "./false||1", "./sh|boot-test|7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "./false (exit 1), ./sh (exit 7) failed") {
		t.Errorf("Result.Err() = %v", err)
	}
	if last.Boot <= 0 || last.Boot > last.Duration {
		t.Errorf("boot time %s outside (0, %s]", last.Boot, last.Duration)
	}
	if !strings.Contains(console.String(), "[boot-test] hello from the guest\n") {
		t.Errorf("live console lacks the job's line with the configuration prefix:\n%s", console.String())
	}
	t.Logf("boot to userspace %s, whole run %s", last.Boot, last.Duration)
}

// TestBootHangIsKilledAndRetried boots a guest whose only job never ends: the runner must kill
// qemu at the timeout, boot once more, and leave no qemu behind.
func TestBootHangIsKilledAndRetried(t *testing.T) {
	h := requireBoot(t)
	work := t.TempDir()
	cfg, bins := busyboxJobs(h, work, []string{"sleep", "3600"})
	r := Runner{Busybox: h.busybox, Attempts: 2, BootTimeout: 6 * time.Second, TestTimeout: time.Minute, Log: slog.New(slog.DiscardHandler)}
	res, err := r.runConfig(context.Background(), qemu{path: h.qemu, accel: AccelTCG, kernel: h.kernel.Vmlinux}, cfg, bins, work)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(res.Attempts))
	}
	for i, a := range res.Attempts {
		if a.Err == nil || !strings.Contains(a.Err.Error(), "timed out after 6s") {
			t.Errorf("attempt %d: err = %v, want a timeout", i+1, a.Err)
		}
		if a.Duration > 15*time.Second {
			t.Errorf("attempt %d took %s: qemu outlived its timeout", i+1, a.Duration)
		}
	}
	initrd := filepath.Join(work, cfg.Name+".cpio")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(initrd)) {
			t.Errorf("qemu still running: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}
