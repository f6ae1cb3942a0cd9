package vm

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// jobKey identifies a binary: the same package's tests and program are different binaries.
type jobKey struct {
	pkg     string
	program bool
}

// buildBinaries builds one static binary per distinct package of jobs into outDir: the package's
// test binary (go test -c) or its program (go build).
func buildBinaries(ctx context.Context, goTool, moduleDir, outDir string, jobs []Job, log *slog.Logger) (map[jobKey]guestBinary, error) {
	bins := map[jobKey]guestBinary{}
	for _, j := range jobs {
		key := jobKey{j.Package, j.Program}
		if _, ok := bins[key]; ok {
			continue
		}
		b, err := buildOne(ctx, goTool, moduleDir, outDir, j, log)
		if err != nil {
			return nil, err
		}
		bins[key] = b
	}
	return bins, nil
}

func buildOne(ctx context.Context, goTool, moduleDir, outDir string, j Job, log *slog.Logger) (guestBinary, error) {
	srcDir, err := goOutput(ctx, goTool, moduleDir, "list", "-f", "{{.Dir}}", j.Package)
	if err != nil {
		return guestBinary{}, fmt.Errorf("find package %s: %w", j.Package, err)
	}
	name := j.binaryName()
	args := []string{"test", "-c"}
	if j.Program {
		args = []string{"build"}
	}
	out := filepath.Join(outDir, name)
	args = append(args, "-o", out, j.Package)
	start := time.Now()
	if _, err := goOutput(ctx, goTool, moduleDir, args...); err != nil {
		return guestBinary{}, fmt.Errorf("build %s for the guest: %w", j.Package, err)
	}
	if _, err := os.Stat(out); err != nil {
		return guestBinary{}, fmt.Errorf("build %s for the guest: go %s wrote no binary (a package without tests?): %w",
			j.Package, strings.Join(args, " "), err)
	}
	log.Debug("built guest binary", "package", j.Package, "program", j.Program, "took", time.Since(start).Round(time.Millisecond))
	return guestBinary{job: j, host: out, name: name, srcDir: strings.TrimSpace(srcDir)}, nil
}

// goOutput runs the go tool in the module with cgo off, so every binary is static and runs in a
// guest that has no C library.
func goOutput(ctx context.Context, goTool, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}
