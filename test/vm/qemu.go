package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Accelerators qemu can run guests with.
const (
	AccelAuto = "auto"
	AccelTCG  = "tcg"
	AccelKVM  = "kvm"
)

// qemu boots guests of one kernel with one accelerator.
type qemu struct {
	path   string
	accel  string
	kernel string
}

func (q qemu) args(cfg Config, initrd string) []string {
	args := []string{"-machine", "pc", "-nodefaults", "-no-reboot", "-display", "none", "-monitor", "none", "-serial", "stdio"}
	if q.accel == AccelKVM {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		// TCG shows SMT siblings only with an Intel CPU model (AMD models need topoext, which
		// TCG lacks).
		args = append(args, "-accel", "tcg,thread=multi", "-cpu", "max,vendor=GenuineIntel")
	}
	args = append(args, cfg.Machine.qemuArgs()...)
	return append(args, "-kernel", q.kernel, "-initrd", initrd, "-append", cfg.kernelArgs())
}

// boot runs one guest until it powers off or timeout passes, killing qemu's whole process group
// on timeout or cancellation. live, when not nil, receives every console line as it arrives.
func (q qemu) boot(ctx context.Context, cfg Config, initrd, nonce string, timeout time.Duration, live io.Writer) Attempt {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, q.path, q.args(cfg, initrd)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Attempt{Err: fmt.Errorf("start qemu: %w", err)}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Attempt{Err: fmt.Errorf("start %s: %w", q.path, err)}
	}
	con := newConsole(nonce, cfg.Jobs, start)
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, rerr := r.ReadString('\n')
		if line != "" {
			line = strings.TrimRight(line, "\r\n")
			con.line(line, time.Now())
			if live != nil {
				fmt.Fprintf(live, "[%s] %s\n", cfg.Name, line)
			}
		}
		if rerr != nil {
			break
		}
	}
	waitErr := cmd.Wait()
	a := Attempt{Boot: con.upAfter, Duration: time.Since(start), Console: con.full.String(), Jobs: con.results(), Err: con.err()}
	switch {
	case a.Err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		a.Err = fmt.Errorf("timed out after %s: %w", timeout, a.Err)
	case ctx.Err() != nil:
		a.Err = fmt.Errorf("cancelled: %w", a.Err)
	case waitErr != nil:
		a.Err = fmt.Errorf("%w; qemu: %v: %s", a.Err, waitErr, bytes.TrimSpace(stderr.Bytes()))
	}
	return a
}

// tailBuffer keeps the last few KiB written to it: enough of qemu's stderr to say what failed.
type tailBuffer struct{ buf []byte }

const tailLimit = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailLimit {
		t.buf = t.buf[len(t.buf)-tailLimit:]
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf }
