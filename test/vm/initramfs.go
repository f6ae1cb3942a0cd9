package vm

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Paths inside the guest.
const (
	guestSpec = "/finegrain/vm.json"
	guestBin  = "/finegrain/bin"
	guestSrc  = "/finegrain/src"
)

// guestBinary is a built guest binary for one job.
type guestBinary struct {
	job Job
	// host is the binary's path on the host; name its file name under /finegrain/bin.
	host, name string
	// srcDir is the package directory on the host; its testdata directory travels along.
	srcDir string
}

// guestDir is the package's working directory inside the guest, mirroring the module layout so
// tests find testdata/ where `go test` would put them.
func (b guestBinary) guestDir() string {
	return path.Join(guestSrc, strings.TrimPrefix(b.job.Package, "./"))
}

// guestRAMDisk is where the RAM disk driver lies in the guest; /init loads it (one 16 MiB disk,
// /dev/ram0) so that tests of block I/O limits have a whole disk.
const guestRAMDisk = "/lib/modules/" + ramDiskModule

// writeInitramfs writes the guest's root file system for cfg to dst: busybox, /init, the
// configuration as JSON, the binaries and their packages' testdata, and the RAM disk driver
// module ramDisk when it is not empty.
func writeInitramfs(dst string, cfg Config, bins []guestBinary, busybox, ramDisk, nonce string, testTimeout time.Duration) error {
	spec, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode configuration %s: %w", cfg.Name, err)
	}
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("create initramfs: %w", err)
	}
	defer f.Close()
	w := newCPIOWriter(f)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var parts []string
		for d := p; d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			parts = append(parts, d)
		}
		for i := len(parts) - 1; i >= 0; i-- {
			dirs[parts[i]] = true
			if err := w.Dir(parts[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "run", "root", "finegrain/bin"} {
		if err := mkdirs(d); err != nil {
			return err
		}
	}
	steps := []func() error{
		func() error { return w.CharDev("dev/console", 0o600, 5, 1) },
		func() error { return w.File("bin/busybox", 0o755, busybox) },
		func() error {
			return w.Bytes("init", 0o755, []byte(initScript(cfg, bins, ramDisk != "", nonce, testTimeout)))
		},
		func() error { return w.Bytes(strings.TrimPrefix(guestSpec, "/"), 0o644, spec) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("write initramfs %s: %w", dst, err)
		}
	}
	if ramDisk != "" {
		if err := mkdirs(path.Dir(strings.TrimPrefix(guestRAMDisk, "/"))); err != nil {
			return fmt.Errorf("write initramfs %s: %w", dst, err)
		}
		if err := w.File(strings.TrimPrefix(guestRAMDisk, "/"), 0o644, ramDisk); err != nil {
			return fmt.Errorf("write initramfs %s: %w", dst, err)
		}
	}
	for _, b := range bins {
		if err := w.File(path.Join(strings.TrimPrefix(guestBin, "/"), b.name), 0o755, b.host); err != nil {
			return fmt.Errorf("write initramfs %s: %w", dst, err)
		}
		if err := addPackageDir(w, mkdirs, b); err != nil {
			return fmt.Errorf("write initramfs %s: %w", dst, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write initramfs %s: %w", dst, err)
	}
	return f.Close()
}

// addPackageDir creates the job's working directory and copies the package's testdata tree.
func addPackageDir(w *cpioWriter, mkdirs func(string) error, b guestBinary) error {
	dir := strings.TrimPrefix(b.guestDir(), "/")
	if err := mkdirs(dir); err != nil {
		return err
	}
	root := filepath.Join(b.srcDir, "testdata")
	if _, err := os.Stat(root); err != nil {
		return nil // the package has no testdata
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(b.srcDir, p)
		if err != nil {
			return err
		}
		name := path.Join(dir, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return mkdirs(name)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return w.File(name, uint32(info.Mode().Perm()), p)
		default:
			return fmt.Errorf("testdata entry %s is neither a file nor a directory; the guest image holds only those", p)
		}
	})
}

// initScript is the guest's /init: mount the pseudo file systems and cgroups, run every job with
// markers around it, power off. Any setup failure prints a fail marker and powers off at once.
func initScript(cfg Config, bins []guestBinary, ramDisk bool, nonce string, testTimeout time.Duration) string {
	var b strings.Builder
	m := markerPrefix(nonce)
	fmt.Fprintf(&b, `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root TMPDIR=/tmp
fail() { echo "%[1]s:fail:$*"; poweroff -f; }
mount -t proc proc /proc || fail mount /proc
mount -t sysfs sysfs /sys || fail mount /sys
mount -t devtmpfs devtmpfs /dev || fail mount /dev
mount -t tmpfs -o mode=1777 tmpfs /tmp || fail mount /tmp
mount -t tmpfs -o mode=755 tmpfs /run || fail mount /run
`, m)
	if ramDisk {
		// A driver that does not load leaves the block I/O tests to skip, saying so.
		fmt.Fprintf(&b, "insmod %s rd_nr=1 rd_size=16384 || echo 'the RAM disk driver did not load'\n", guestRAMDisk)
	}
	b.WriteString(cgroupSetup(cfg.Cgroup))
	fmt.Fprintf(&b, "export %s=%s %s=%s\n", EnvName, cfg.Name, EnvSpec, guestSpec)
	fmt.Fprintf(&b, "echo %s:up\n", m)
	for i, bin := range bins {
		if bin.job.Helper {
			continue
		}
		args := []string{path.Join(guestBin, bin.name)}
		if !bin.job.Program {
			args = append(args, "-test.v", "-test.count=1", "-test.timeout="+testTimeout.String())
		}
		args = append(args, bin.job.Args...)
		for j := range args {
			args[j] = shellQuote(args[j])
		}
		fmt.Fprintf(&b, "cd %s || fail cd %s\n", shellQuote(bin.guestDir()), shellQuote(bin.guestDir()))
		fmt.Fprintf(&b, "echo %s:begin:%d\n%s\necho %s:end:%d:$?\n", m, i, strings.Join(args, " "), m, i)
	}
	fmt.Fprintf(&b, "echo %s:done\npoweroff -f\n", m)
	return b.String()
}

func cgroupSetup(mode CgroupMode) string {
	if mode == CgroupV2 {
		return `mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup || fail mount cgroup2
for c in cpuset cpu io memory pids; do
  echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control || fail enable cgroup v2 controller $c
done
`
	}
	return `mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup || fail mount cgroup tmpfs
for h in cpuset cpu,cpuacct blkio memory devices freezer net_cls,net_prio perf_event hugetlb pids rdma misc; do
  mkdir /sys/fs/cgroup/$h && mount -t cgroup -o $h cgroup /sys/fs/cgroup/$h || fail mount cgroup v1 $h
done
ln -s cpu,cpuacct /sys/fs/cgroup/cpu && ln -s cpu,cpuacct /sys/fs/cgroup/cpuacct || fail link cpu,cpuacct
ln -s net_cls,net_prio /sys/fs/cgroup/net_cls && ln -s net_cls,net_prio /sys/fs/cgroup/net_prio || fail link net_cls,net_prio
mkdir /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd || fail mount name=systemd
mkdir /sys/fs/cgroup/unified && mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup/unified || fail mount cgroup2 unified
`
}

// shellQuote quotes s for /bin/sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
