// Command vmtest boots the qemu test matrix of package vm: it builds the kernel-facing test
// binaries statically, boots every configuration with Debian's kernel and prints each one's
// outcome. `make test-vm` runs it; -list shows the configurations.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/finegrain-dev/finegrain/test/vm"
)

type options struct {
	configs       string
	packages      string
	run           string
	list          bool
	fetchKernel   bool
	accel         string
	kernel        string
	kernelPackage string
	cacheDir      string
	logDir        string
	bootTimeout   time.Duration
	testTimeout   time.Duration
	attempts      int
	verbose       bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("vmtest", flag.ContinueOnError)
	fs.StringVar(&o.configs, "config", "", "comma-separated configurations to boot (default: all; see -list)")
	fs.StringVar(&o.packages, "packages", "", "comma-separated packages (./pkg/name) to run, dropping the others' jobs (default: all)")
	fs.StringVar(&o.run, "run", "", "run only the guest tests matching this regular expression (their -test.run)")
	fs.BoolVar(&o.list, "list", false, "list the configurations and exit")
	fs.BoolVar(&o.fetchKernel, "fetch-kernel", false, "fetch and cache the guest kernel, print its path and exit")
	fs.StringVar(&o.accel, "accel", vm.AccelAuto, "qemu accelerator: auto (KVM only when a test boot works), tcg or kvm")
	fs.StringVar(&o.kernel, "kernel", "", "boot this uncompressed vmlinux instead of Debian's kernel package")
	fs.StringVar(&o.kernelPackage, "kernel-package", "", "Debian kernel image package (default: the one linux-image-amd64 depends on)")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "where extracted kernels are cached (default ~/.cache/finegrain/vm)")
	fs.StringVar(&o.logDir, "log-dir", "_output/vm", "where each boot's console is saved")
	fs.DurationVar(&o.bootTimeout, "boot-timeout", 5*time.Minute, "limit for one boot, tests included")
	fs.DurationVar(&o.testTimeout, "test-timeout", 0, "-test.timeout of each guest test binary (default 3/4 of -boot-timeout)")
	fs.IntVar(&o.attempts, "attempts", 2, "boots of a configuration whose guest hangs or crashes")
	fs.BoolVar(&o.verbose, "v", false, "stream every guest's console and log at debug level")
	err := fs.Parse(args)
	return o, err
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	cfgs, err := vm.Select(o.configs)
	if err != nil {
		return err
	}
	if cfgs, err = vm.OnlyPackages(cfgs, o.packages); err != nil {
		return err
	}
	cfgs = vm.WithTestRun(cfgs, o.run)
	if o.list {
		for _, c := range cfgs {
			fmt.Printf("%-26s %s\n", c.Name, c.About)
		}
		return nil
	}
	if o.cacheDir == "" {
		if o.cacheDir, err = vm.DefaultCacheDir(); err != nil {
			return err
		}
	}
	kernel, err := vm.FetchKernel(ctx, vm.KernelSource{Vmlinux: o.kernel, Package: o.kernelPackage, CacheDir: o.cacheDir}, log)
	if err != nil {
		return err
	}
	log.Info("guest kernel", "package", kernel.Package, "version", kernel.Version, "path", kernel.Vmlinux)
	if o.fetchKernel {
		fmt.Println(kernel.Vmlinux)
		return nil
	}
	r := vm.Runner{
		Kernel: kernel, Accel: o.accel, BootTimeout: o.bootTimeout, TestTimeout: o.testTimeout,
		Attempts: o.attempts, LogDir: o.logDir, Log: log,
	}
	if o.verbose {
		r.Console = os.Stdout
	}
	results, err := r.Run(ctx, cfgs)
	if len(results) > 0 {
		vm.WriteReport(os.Stdout, results)
	}
	if err != nil {
		return err
	}
	for _, res := range results {
		if res.Err() != nil {
			return errors.New("some guest configurations failed (console logs in " + o.logDir + ")")
		}
	}
	return nil
}
