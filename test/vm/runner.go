package vm

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Runner builds the guest binaries once and boots configurations with them.
type Runner struct {
	// ModuleDir is the module root, where the go tool builds the jobs' packages.
	ModuleDir string
	// Go is the go tool; empty means "go" on PATH.
	Go string
	// Kernel is the guest kernel (see FetchKernel).
	Kernel Kernel
	// QEMU is the qemu-system-x86_64 binary; empty means the one on PATH.
	QEMU string
	// Busybox is a statically linked busybox; empty means /bin/busybox.
	Busybox string
	// Accel is AccelAuto, AccelTCG or AccelKVM; empty means AccelAuto.
	Accel string
	// BootTimeout bounds one boot, jobs included; TestTimeout is each test binary's -test.timeout
	// and should be shorter, so a hanging test dumps its goroutines before the guest is killed.
	BootTimeout, TestTimeout time.Duration
	// Attempts is how often a configuration is booted when the guest hangs or crashes before
	// running every job (never when a job merely fails); zero means 2.
	Attempts int
	// LogDir, when set, receives every attempt's console as <config>.<attempt>.log.
	LogDir string
	// Console, when set, receives every console line as it arrives, prefixed with the
	// configuration's name.
	Console io.Writer
	Log     *slog.Logger
}

// Run builds every job of cfgs, then boots the configurations one after another. The error is
// for problems that stop everything (qemu missing, a build failing); each configuration's own
// outcome is in its Result.
func (r *Runner) Run(ctx context.Context, cfgs []Config) ([]Result, error) {
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return nil, err
		}
	}
	r.defaults()
	qemuPath, err := findQEMU(r.QEMU)
	if err != nil {
		return nil, err
	}
	if err := checkBusybox(r.Busybox); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "finegrain-vm-")
	if err != nil {
		return nil, fmt.Errorf("create guest build directory: %w", err)
	}
	defer os.RemoveAll(work)

	var jobs []Job
	for _, c := range cfgs {
		jobs = append(jobs, c.Jobs...)
	}
	start := time.Now()
	bins, err := buildBinaries(ctx, r.Go, r.ModuleDir, work, jobs, r.Log)
	if err != nil {
		return nil, err
	}
	r.Log.Info("built guest binaries", "count", len(bins), "took", time.Since(start).Round(time.Millisecond))

	accel, err := chooseAccel(ctx, r.Accel, kvmProbe(qemuPath, r.Kernel.Vmlinux, r.Busybox, work), r.Log)
	if err != nil {
		return nil, err
	}
	q := qemu{path: qemuPath, accel: accel, kernel: r.Kernel.Vmlinux}
	var results []Result
	for _, c := range cfgs {
		res, err := r.runConfig(ctx, q, c, bins, work)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

func (r *Runner) defaults() {
	if r.Go == "" {
		r.Go = "go"
	}
	if r.Busybox == "" {
		r.Busybox = "/bin/busybox"
	}
	if r.Accel == "" {
		r.Accel = AccelAuto
	}
	if r.BootTimeout == 0 {
		r.BootTimeout = 5 * time.Minute
	}
	if r.TestTimeout == 0 {
		r.TestTimeout = r.BootTimeout * 3 / 4
	}
	if r.Attempts == 0 {
		r.Attempts = 2
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
}

// runConfig boots one configuration, again when the guest did not finish, up to r.Attempts.
func (r *Runner) runConfig(ctx context.Context, q qemu, c Config, bins map[jobKey]guestBinary, work string) (Result, error) {
	var order []guestBinary
	for _, j := range c.Jobs {
		b := bins[jobKey{j.Package, j.Program}]
		b.job = j
		order = append(order, b)
	}
	res := Result{Config: c, Accel: q.accel}
	for attempt := 1; attempt <= r.Attempts; attempt++ {
		nonce := rand.Text()
		initrd := filepath.Join(work, c.Name+".cpio")
		if err := writeInitramfs(initrd, c, order, r.Busybox, r.Kernel.RAMDisk, nonce, r.TestTimeout); err != nil {
			return res, err
		}
		r.Log.Info("booting guest", "config", c.Name, "attempt", attempt, "accel", q.accel)
		a := q.boot(ctx, c, initrd, nonce, r.BootTimeout, r.Console)
		res.Attempts = append(res.Attempts, a)
		if err := r.saveConsole(c.Name, attempt, a.Console); err != nil {
			return res, err
		}
		if a.Err == nil {
			r.Log.Info("guest finished", "config", c.Name, "boot", a.Boot.Round(time.Millisecond), "took", a.Duration.Round(time.Millisecond))
			return res, nil
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("configuration %s: %w", c.Name, ctx.Err())
		}
		r.Log.Warn("guest did not finish", "config", c.Name, "attempt", attempt, "err", a.Err.Error())
	}
	return res, nil
}

func (r *Runner) saveConsole(config string, attempt int, console string) error {
	if r.LogDir == "" {
		return nil
	}
	if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
		return fmt.Errorf("create console log directory: %w", err)
	}
	path := filepath.Join(r.LogDir, fmt.Sprintf("%s.%d.log", config, attempt))
	if err := os.WriteFile(path, []byte(console), 0o644); err != nil {
		return fmt.Errorf("save console of %s: %w", config, err)
	}
	return nil
}
