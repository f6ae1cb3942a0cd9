package vm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckBusybox(t *testing.T) {
	if err := checkBusybox(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("missing busybox: %v", err)
	}
	// /bin/sh is dash on Debian, dynamically linked.
	if err := checkBusybox("/bin/sh"); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("dynamic /bin/sh: %v", err)
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox is not installed (Debian busybox-static)")
	}
	if err := checkBusybox("/bin/busybox"); err != nil {
		t.Error(err)
	}
}

func TestFindQEMUSaysWhatToInstall(t *testing.T) {
	_, err := findQEMU(filepath.Join(t.TempDir(), "qemu-system-x86_64"))
	if err == nil || !strings.Contains(err.Error(), "install Debian's qemu-system-x86") {
		t.Errorf("missing qemu: %v", err)
	}
}

// TestChooseAccel checks the decision around the probe; whether this host's KVM works is
// kvmUnusable's and the probe's business, exercised by the boot tests.
func TestChooseAccel(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	probed := false
	broken := func(context.Context) error { probed = true; return errors.New("KVM internal error") }
	if got, err := chooseAccel(ctx, AccelTCG, broken, log); got != AccelTCG || err != nil || probed {
		t.Errorf("tcg: %s, %v, probed=%v; want tcg without probing", got, err, probed)
	}
	if got, err := chooseAccel(ctx, AccelAuto, broken, log); got != AccelTCG || err != nil {
		t.Errorf("auto with broken KVM: %s, %v; want tcg", got, err)
	}
	if _, err := chooseAccel(ctx, AccelKVM, broken, log); err == nil || !strings.Contains(err.Error(), "KVM was asked for but is not usable") {
		t.Errorf("kvm with broken KVM: %v", err)
	}
	if _, err := chooseAccel(ctx, "hvf", broken, log); err == nil || !strings.Contains(err.Error(), `accelerator "hvf"`) {
		t.Errorf("unknown accelerator: %v", err)
	}
	if kvmUnusable() == nil {
		works := func(context.Context) error { return nil }
		if got, err := chooseAccel(ctx, AccelAuto, works, log); got != AccelKVM || err != nil {
			t.Errorf("auto with working KVM: %s, %v; want kvm", got, err)
		}
	}
}

func TestAptParsing(t *testing.T) {
	show := "Package: linux-image-amd64\nSource: linux-signed-amd64 (6.1.172+1)\nVersion: 6.1.172-1\n" +
		"Depends: linux-image-6.1.0-48-amd64 (= 6.1.172-1)\nDescription: Linux for 64-bit PCs (meta-package)\n"
	if m := aptDepends.FindStringSubmatch(show); m == nil || m[1] != "linux-image-6.1.0-48-amd64" {
		t.Errorf("Depends match = %v, want linux-image-6.1.0-48-amd64", m)
	}
	if got := aptField(show, "Version"); got != "6.1.172-1" {
		t.Errorf("Version = %q", got)
	}
	if got := aptField(show, "Missing"); got != "" {
		t.Errorf("missing field = %q, want empty", got)
	}
}

func TestNewestCached(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"linux-image-6.1.0-47-amd64_6.1.170-3", "linux-image-6.1.0-48-amd64_6.1.172-1", "linux-image-6.1.0-49-amd64_6.1.180-1", ".download-123"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// -49 was never finished (no vmlinux); -48 was written last.
	for i, name := range []string{"linux-image-6.1.0-47-amd64_6.1.170-3", "linux-image-6.1.0-48-amd64_6.1.172-1"} {
		path := filepath.Join(dir, name, "vmlinux")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Unix(1_700_000_000+int64(i)*60, 0)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
	}
	k, ok := newestCached(dir, "")
	if !ok || k.Package != "linux-image-6.1.0-48-amd64" || k.Version != "6.1.172-1" {
		t.Errorf("newest cached = %+v, %v", k, ok)
	}
	if k, ok := newestCached(dir, "linux-image-6.1.0-47-amd64"); !ok || k.Version != "6.1.170-3" {
		t.Errorf("cached -47 = %+v, %v", k, ok)
	}
	if _, ok := newestCached(filepath.Join(dir, "absent"), ""); ok {
		t.Error("found a kernel in a missing cache")
	}
}
