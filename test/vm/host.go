package vm

import (
	"context"
	"crypto/rand"
	"debug/elf"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

// findQEMU returns the qemu binary to use: path when given, else qemu-system-x86_64 on PATH.
func findQEMU(path string) (string, error) {
	if path == "" {
		path = "qemu-system-x86_64"
	}
	found, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%s not found: install Debian's qemu-system-x86 (`. hack/deps.sh && install_deps vm`): %w", path, err)
	}
	return found, nil
}

// checkBusybox verifies that path is a statically linked busybox, the only thing the guest has
// besides the test binaries.
func checkBusybox(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("busybox %s: %w: install Debian's busybox-static", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox %s is dynamically linked and cannot run in the guest: install Debian's busybox-static", path)
		}
	}
	return nil
}

var virtFlags = regexp.MustCompile(`(?m)^flags\s*:.*\b(vmx|svm)\b`)

// chooseAccel picks the accelerator. auto takes KVM only when /dev/kvm opens, the CPU offers
// vmx or svm, and a short test boot under KVM succeeds; nested hosts often expose a /dev/kvm that
// fails on the first guest instruction. The reason for the choice is logged.
func chooseAccel(ctx context.Context, want string, probe func(context.Context) error, log *slog.Logger) (string, error) {
	switch want {
	case AccelTCG:
		return AccelTCG, nil
	case AccelKVM, AccelAuto:
	default:
		return "", fmt.Errorf("accelerator %q: want %s, %s or %s", want, AccelAuto, AccelTCG, AccelKVM)
	}
	why := kvmUnusable()
	if why == nil {
		why = probe(ctx)
	}
	switch {
	case why == nil:
		log.Info("guests run under KVM")
		return AccelKVM, nil
	case want == AccelKVM:
		return "", fmt.Errorf("KVM was asked for but is not usable: %w", why)
	}
	log.Info("guests run under TCG emulation, KVM is not usable", "reason", why.Error())
	return AccelTCG, nil
}

func kvmUnusable() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /dev/kvm: %w", err)
	}
	f.Close()
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return fmt.Errorf("read /proc/cpuinfo: %w", err)
	}
	if !virtFlags.Match(cpuinfo) {
		return fmt.Errorf("/dev/kvm exists but the CPU has no vmx or svm flag (a nested or paravirtual backend)")
	}
	return nil
}

// kvmProbe boots a one-CPU guest that only reaches userspace and powers off, under KVM.
func kvmProbe(qemuPath, kernel, busybox, workDir string) func(context.Context) error {
	return func(ctx context.Context) error {
		cfg := Config{
			Name:    "kvm-probe",
			Machine: Machine{Sockets: 1, CoresPerSocket: 1, ThreadsPerCore: 1, Nodes: []Node{{CPUs: "0", MemoryMiB: 256}}},
			Cgroup:  CgroupV2,
		}
		initrd := filepath.Join(workDir, "kvm-probe.cpio")
		nonce := rand.Text()
		if err := writeInitramfs(initrd, cfg, nil, busybox, "", nonce, time.Minute); err != nil {
			return err
		}
		q := qemu{path: qemuPath, accel: AccelKVM, kernel: kernel}
		if a := q.boot(ctx, cfg, initrd, nonce, 30*time.Second, nil); a.Err != nil {
			return fmt.Errorf("test boot under KVM: %w", a.Err)
		}
		return nil
	}
}
