package vm

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// metaPackage is Debian's package that always depends on the current kernel image package.
const metaPackage = "linux-image-amd64"

// Kernel is a guest kernel ready to boot.
type Kernel struct {
	// Package and Version name the Debian package it came from ("local" for a given file).
	Package string
	Version string
	// Vmlinux is the uncompressed ELF kernel qemu boots through its PVH entry.
	Vmlinux string
	// RAMDisk is the package's RAM disk driver module (brd.ko, beside vmlinux), which the guests
	// load so that block I/O limits have a whole disk to act on (Debian's kernel builds no block
	// driver in); empty for a local vmlinux.
	RAMDisk string
}

// ramDiskModule is the RAM disk driver's file name, in the package under
// ./lib/modules/<version>/kernel/drivers/block/ and in the cache beside vmlinux.
const ramDiskModule = "brd.ko"

// isRAMDiskModule matches the RAM disk driver in a kernel image package's data archive.
func isRAMDiskModule(name string) bool {
	return strings.HasPrefix(name, "./lib/modules/") && strings.HasSuffix(name, "/kernel/drivers/block/"+ramDiskModule)
}

// KernelSource says where the guest kernel comes from.
type KernelSource struct {
	// Vmlinux, when set, is used as is and nothing is downloaded.
	Vmlinux string
	// Package is a Debian kernel image package ("linux-image-6.1.0-48-amd64"); empty means the
	// one linux-image-amd64 currently depends on.
	Package string
	// CacheDir holds extracted kernels, one directory per package and version.
	CacheDir string
}

// DefaultCacheDir is where kernels are cached between runs: $XDG_CACHE_HOME/finegrain/vm, or
// ~/.cache/finegrain/vm.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory for guest kernels: %w", err)
	}
	return filepath.Join(dir, "finegrain", "vm"), nil
}

// FetchKernel returns a bootable guest kernel: the cached one for the current package version
// when present, else the package downloaded with apt-get (never installed), its vmlinuz
// decompressed into vmlinux and cached.
func FetchKernel(ctx context.Context, src KernelSource, log *slog.Logger) (Kernel, error) {
	if src.Vmlinux != "" {
		if err := checkPVH(src.Vmlinux); err != nil {
			return Kernel{}, err
		}
		return Kernel{Package: "local", Version: "local", Vmlinux: src.Vmlinux}, nil
	}
	pkg, version, err := resolveKernelPackage(ctx, src.Package, log)
	if err != nil {
		if k, ok := newestCached(src.CacheDir, src.Package); ok {
			log.Warn("using cached guest kernel, apt could not name the current one", "package", k.Package, "version", k.Version, "err", err)
			return k, nil
		}
		return Kernel{}, err
	}
	dir := filepath.Join(src.CacheDir, pkg+"_"+version)
	k := Kernel{Package: pkg, Version: version, Vmlinux: filepath.Join(dir, "vmlinux"), RAMDisk: filepath.Join(dir, ramDiskModule)}
	if _, err := os.Stat(k.Vmlinux); err == nil {
		if _, err := os.Stat(k.RAMDisk); err != nil {
			// Cached before the guests loaded the RAM disk driver: fetch the package again for it.
			log.Info("downloading guest kernel package for its RAM disk driver", "package", pkg, "version", version, "cache", dir)
			if err := downloadRAMDisk(ctx, pkg, version, dir); err != nil {
				return Kernel{}, fmt.Errorf("guest kernel %s %s: %w", pkg, version, err)
			}
		}
		log.Debug("guest kernel cached", "package", pkg, "version", version, "path", k.Vmlinux)
		return k, nil
	}
	log.Info("downloading guest kernel", "package", pkg, "version", version, "cache", dir)
	if err := downloadKernel(ctx, pkg, version, dir); err != nil {
		return Kernel{}, fmt.Errorf("guest kernel %s %s: %w", pkg, version, err)
	}
	return k, nil
}

var aptDepends = regexp.MustCompile(`(?m)^Depends:.*?\b(linux-image-[0-9][^\s,(]*)`)

// resolveKernelPackage names the kernel image package and its candidate version, updating apt's
// lists once (as root) when they do not know it.
func resolveKernelPackage(ctx context.Context, pkg string, log *slog.Logger) (string, string, error) {
	resolve := func() (string, string, error) {
		name := pkg
		if name == "" {
			show, err := aptShow(ctx, metaPackage)
			if err != nil {
				return "", "", err
			}
			m := aptDepends.FindStringSubmatch(show)
			if m == nil {
				return "", "", fmt.Errorf("%s names no linux-image package in its Depends", metaPackage)
			}
			name = m[1]
		}
		show, err := aptShow(ctx, name)
		if err != nil {
			return "", "", err
		}
		version := aptField(show, "Version")
		if version == "" {
			return "", "", fmt.Errorf("apt-cache shows no Version for %s", name)
		}
		return name, version, nil
	}
	name, version, err := resolve()
	if err == nil || os.Geteuid() != 0 {
		return name, version, err
	}
	log.Info("apt does not know the kernel package, updating package lists", "err", err)
	if out, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
		return "", "", fmt.Errorf("%w (apt-get update also failed: %v: %s)", err, uerr, bytes.TrimSpace(out))
	}
	return resolve()
}

func aptShow(ctx context.Context, pkg string) (string, error) {
	if _, err := exec.LookPath("apt-cache"); err != nil {
		return "", fmt.Errorf("apt-cache not found: the guest kernel comes from Debian's %s package; on other systems pass a vmlinux with -kernel: %w", metaPackage, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", pkg)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return "", fmt.Errorf("apt-cache show %s found no package (%v %s): run apt-get update, or pass a vmlinux with -kernel",
			pkg, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

func aptField(show, field string) string {
	sc := bufio.NewScanner(strings.NewReader(show))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// downloadKernel fetches the package into a scratch directory beside dir, extracts vmlinux and
// renames the scratch directory into place, so dir is either complete or absent.
func downloadKernel(ctx context.Context, pkg, version, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create kernel cache: %w", err)
	}
	tmp, deb, err := aptDownload(ctx, pkg, version, filepath.Dir(dir))
	defer os.RemoveAll(tmp)
	if err != nil {
		return err
	}
	vmlinuz := filepath.Join(tmp, "vmlinuz")
	if err := extractFile(ctx, deb, isVmlinuz, "./boot/vmlinuz-*", vmlinuz); err != nil {
		return err
	}
	if err := extractFile(ctx, deb, isRAMDiskModule, "./lib/modules/*/kernel/drivers/block/"+ramDiskModule, filepath.Join(tmp, ramDiskModule)); err != nil {
		return err
	}
	if err := extractVmlinux(ctx, vmlinuz, filepath.Join(tmp, "vmlinux")); err != nil {
		return err
	}
	for _, f := range []string{deb, vmlinuz} {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove %s: %w", f, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("close kernel download directory: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "vmlinux")); statErr == nil {
			return nil // another run cached the same kernel meanwhile
		}
		return fmt.Errorf("move kernel into cache %s: %w", dir, err)
	}
	return nil
}

// aptDownload downloads the package's .deb into a new scratch directory below parent and returns
// the directory (to remove when done, also after an error) and the .deb's path.
func aptDownload(ctx context.Context, pkg, version, parent string) (string, string, error) {
	tmp, err := os.MkdirTemp(parent, ".download-")
	if err != nil {
		return "", "", fmt.Errorf("create kernel download directory: %w", err)
	}
	// apt drops privileges to _apt for downloads; a private temp directory is not writable by it.
	if err := os.Chmod(tmp, 0o777); err != nil {
		return tmp, "", fmt.Errorf("open kernel download directory to apt: %w", err)
	}
	get := exec.CommandContext(ctx, "apt-get", "download", "-qq", pkg+"="+version)
	get.Dir = tmp
	if out, err := get.CombinedOutput(); err != nil {
		return tmp, "", fmt.Errorf("apt-get download %s=%s: %w: %s", pkg, version, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return tmp, "", fmt.Errorf("apt-get download left %d .deb files in %s, want 1", len(debs), tmp)
	}
	return tmp, debs[0], nil
}

func isVmlinuz(name string) bool { return strings.HasPrefix(name, "./boot/vmlinuz-") }

// downloadRAMDisk fetches the package into a scratch directory and moves its RAM disk driver
// into the cached kernel's directory dir.
func downloadRAMDisk(ctx context.Context, pkg, version, dir string) error {
	tmp, deb, err := aptDownload(ctx, pkg, version, filepath.Dir(dir))
	defer os.RemoveAll(tmp)
	if err != nil {
		return err
	}
	mod := filepath.Join(tmp, ramDiskModule)
	if err := extractFile(ctx, deb, isRAMDiskModule, "./lib/modules/*/kernel/drivers/block/"+ramDiskModule, mod); err != nil {
		return err
	}
	if err := os.Rename(mod, filepath.Join(dir, ramDiskModule)); err != nil {
		return fmt.Errorf("move %s into cache %s: %w", ramDiskModule, dir, err)
	}
	return nil
}

// extractFile copies the one file of a .deb whose path match accepts (what names it in errors)
// to dst, reading the package's data archive through dpkg --fsys-tarfile.
func extractFile(ctx context.Context, deb string, match func(string) bool, what, dst string) error {
	cmd := exec.CommandContext(ctx, "dpkg", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("dpkg --fsys-tarfile %s: %w", deb, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dpkg --fsys-tarfile %s: %w", deb, err)
	}
	found, copyErr := copyFromTar(stdout, match, dst)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg --fsys-tarfile %s: %w: %s", deb, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if copyErr != nil {
		return fmt.Errorf("read %s: %w", deb, copyErr)
	}
	if !found {
		return fmt.Errorf("%s holds no %s file: is it a kernel image package?", deb, what)
	}
	return nil
}

func copyFromTar(r io.Reader, match func(string) bool, dst string) (bool, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if h.Typeflag != tar.TypeReg || !match(h.Name) {
			continue
		}
		f, err := os.Create(dst)
		if err != nil {
			return false, err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return false, err
		}
		return true, f.Close()
	}
}

// newestCached returns the most recently extracted cached kernel, of pkg when given.
func newestCached(cacheDir, pkg string) (Kernel, bool) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return Kernel{}, false
	}
	type found struct {
		k   Kernel
		mod int64
	}
	var all []found
	for _, e := range entries {
		name, version, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasPrefix(name, "linux-image-") || (pkg != "" && name != pkg) {
			continue
		}
		path := filepath.Join(cacheDir, e.Name(), "vmlinux")
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		k := Kernel{Package: name, Version: version, Vmlinux: path}
		if mod := filepath.Join(cacheDir, e.Name(), ramDiskModule); fileExists(mod) {
			k.RAMDisk = mod
		}
		all = append(all, found{k, st.ModTime().UnixNano()})
	}
	if len(all) == 0 {
		return Kernel{}, false
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod > all[j].mod })
	return all[0].k, true
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
