// Package ep runs the processes of an embarrassingly parallel benchmark together: it starts N
// copies of a program, waits until every one has finished its setup, lets the caller act on
// them (for example move each into a cgroup) while none is timing yet, releases them all at
// once and collects what each wrote. The child side is Ready. It does not know what the
// children compute or where they should run.
package ep

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The handshake: the child writes readyLine on stdout when set up, the parent answers goLine on
// the child's stdin; everything the child writes on stdout afterwards is its result.
const (
	readyLine = "fgworker-ready"
	goLine    = "go"
)

// Spec says what to start.
type Spec struct {
	// Path is the program; Args returns the arguments (without argv[0]) of rank i.
	Path string
	Args func(rank int) []string
	// Env is added to the parent's environment.
	Env []string
	// N is the number of processes.
	N int
	// Stderr receives every child's standard error (normally os.Stderr).
	Stderr io.Writer
	// ReadyTimeout bounds how long the setup of all children may take.
	ReadyTimeout time.Duration
	// CgroupFD, when set, returns for each rank an open cgroup v2 directory to create the child
	// in (clone3 with CLONE_INTO_CGROUP, Linux 5.7): it never runs, and never allocates memory,
	// outside that cgroup. A negative descriptor starts the rank in the parent's cgroup.
	CgroupFD func(rank int) int
}

// Proc is one started child.
type Proc struct {
	Rank int
	PID  int

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader

	waitOnce sync.Once
	waitErr  error
	exited   chan struct{}
}

// wait reaps the child once; later calls return the same result.
func (p *Proc) wait() error {
	p.waitOnce.Do(func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	})
	return p.waitErr
}

// Start starts every child and returns once each has reported ready. On any failure it kills
// the children it started.
func Start(ctx context.Context, s Spec) ([]*Proc, error) {
	if s.N < 1 {
		return nil, fmt.Errorf("need at least one process, got %d", s.N)
	}
	var procs []*Proc
	fail := func(err error) ([]*Proc, error) {
		Kill(procs)
		return nil, err
	}
	for rank := range s.N {
		p, err := start(ctx, s, rank)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
	}
	ready := make(chan error, len(procs))
	for _, p := range procs {
		go func() { ready <- p.awaitReady() }()
	}
	timeout := time.NewTimer(s.ReadyTimeout)
	defer timeout.Stop()
	for range procs {
		select {
		case err := <-ready:
			if err != nil {
				return fail(err)
			}
		case <-timeout.C:
			return fail(fmt.Errorf("processes of %s not ready after %v: setup too slow or stuck", s.Path, s.ReadyTimeout))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	return procs, nil
}

func start(ctx context.Context, s Spec, rank int) (*Proc, error) {
	cmd := exec.CommandContext(ctx, s.Path, s.Args(rank)...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stderr = s.Stderr
	// A child outliving a killed parent would keep loading the machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	where := ""
	if s.CgroupFD != nil {
		if fd := s.CgroupFD(rank); fd >= 0 {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
			where = fmt.Sprintf(" in the cgroup of descriptor %d", fd)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start rank %d (%s)%s: %w", rank, s.Path, where, err)
	}
	return &Proc{Rank: rank, PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), exited: make(chan struct{})}, nil
}

func (p *Proc) awaitReady() error {
	line, err := p.stdout.ReadString('\n')
	if strings.TrimSpace(line) == readyLine {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("unexpected output %q", strings.TrimSpace(line))
	}
	return fmt.Errorf("rank %d (pid %d) did not report ready: %w; %s", p.Rank, p.PID, err, p.exitReason())
}

// exitReason waits briefly for a child that is going away and says how it ended.
func (p *Proc) exitReason() string {
	go func() { _ = p.wait() }()
	select {
	case <-p.exited:
		if err := p.waitErr; err != nil {
			return fmt.Sprintf("it exited: %v (its messages are above)", err)
		}
		return "it exited with status 0"
	case <-time.After(2 * time.Second):
		return "it is still running"
	}
}

// Release lets every child start timing, as close together as the pipes allow.
func Release(procs []*Proc) error {
	var errs []error
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, goLine+"\n"); err != nil {
			errs = append(errs, fmt.Errorf("release rank %d (pid %d): %w", p.Rank, p.PID, err))
		}
	}
	return errors.Join(errs...)
}

// Collect waits for every child and returns what each wrote after the handshake, by rank.
func Collect(procs []*Proc) ([][]byte, error) {
	out := make([][]byte, len(procs))
	var errs []error
	for i, p := range procs {
		var buf bytes.Buffer
		_, rerr := io.Copy(&buf, p.stdout)
		_ = p.stdin.Close()
		if err := p.wait(); err != nil {
			errs = append(errs, fmt.Errorf("rank %d (pid %d) failed: %w (its messages are above)", p.Rank, p.PID, err))
			continue
		}
		if rerr != nil {
			errs = append(errs, fmt.Errorf("read result of rank %d (pid %d): %w", p.Rank, p.PID, rerr))
			continue
		}
		out[i] = buf.Bytes()
	}
	return out, errors.Join(errs...)
}

// Kill ends every child and reaps it.
func Kill(procs []*Proc) {
	for _, p := range procs {
		_ = p.cmd.Process.Kill()
		_ = p.stdin.Close()
		_ = p.wait()
	}
}

// Ready is the child side: it reports ready on w and blocks until the parent says go on r.
func Ready(w io.Writer, r io.Reader) error {
	if _, err := io.WriteString(w, readyLine+"\n"); err != nil {
		return fmt.Errorf("report ready: %w", err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if strings.TrimSpace(line) == goLine {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("got %q", strings.TrimSpace(line))
	}
	return fmt.Errorf("wait for the go signal from the parent on stdin: %w", err)
}
