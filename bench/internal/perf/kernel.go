package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel opens real counters with perf_event_open(2).
type Kernel struct{}

var _ Opener = Kernel{}

// Open counts ev on thread tid on any CPU, and on the threads tid creates from now on.
//
// No exclude_kernel / exclude_hv bits are set: context-switches and cpu-migrations happen in the
// kernel and read 0 when kernel time is excluded.
func (Kernel) Open(ev Event, tid int) (Counter, error) {
	attr := unix.PerfEventAttr{
		Type:        ev.Type,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:      ev.Config,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
		Bits:        unix.PerfBitDisabled | unix.PerfBitInherit,
	}
	fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open %s on thread %d: %w", ev.Name, tid, err)
	}
	return fdCounter(fd), nil
}

type fdCounter int

func (c fdCounter) Enable() error  { return unix.IoctlSetInt(int(c), unix.PERF_EVENT_IOC_ENABLE, 0) }
func (c fdCounter) Disable() error { return unix.IoctlSetInt(int(c), unix.PERF_EVENT_IOC_DISABLE, 0) }
func (c fdCounter) Close() error   { return unix.Close(int(c)) }

// Read decodes the read_format chosen in Open: value, time_enabled, time_running.
func (c fdCounter) Read() (Reading, error) {
	var buf [24]byte
	n, err := unix.Read(int(c), buf[:])
	if err != nil {
		return Reading{}, err
	}
	if n != len(buf) {
		return Reading{}, fmt.Errorf("short read from perf counter: %d of %d bytes", n, len(buf))
	}
	return Reading{
		Value:   binary.NativeEndian.Uint64(buf[0:]),
		Enabled: binary.NativeEndian.Uint64(buf[8:]),
		Running: binary.NativeEndian.Uint64(buf[16:]),
	}, nil
}

// UnavailableError says why the kernel gave no count for an event.
type UnavailableError struct {
	Event string
	// Errno is the error perf_event_open returned, 0 when the event opened but never counted.
	Errno  unix.Errno
	Reason string
}

func (e *UnavailableError) Error() string {
	if e.Errno == 0 {
		return fmt.Sprintf("%s unavailable: %s", e.Event, e.Reason)
	}
	return fmt.Sprintf("%s unavailable: %s: %s", e.Event, unix.ErrnoName(e.Errno), e.Reason)
}

// Unwrap lets errors.Is match the errno.
func (e *UnavailableError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

func unavailable(ev Event, tid int, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return &UnavailableError{Event: ev.Name, Reason: fmt.Sprintf("opening it on thread %d failed: %v", tid, err)}
	}
	return &UnavailableError{Event: ev.Name, Errno: errno, Reason: reason(errno)}
}

func isThreadGone(err error) bool { return errors.Is(err, unix.ESRCH) }

func reason(errno unix.Errno) string {
	switch errno {
	case unix.ENOENT:
		return "the kernel offers no such event on this machine (no hardware PMU exposed, common in virtual machines)"
	case unix.EOPNOTSUPP:
		return "the PMU does not support this event or counting mode"
	case unix.ENODEV:
		return "no PMU device serves this event type"
	case unix.EACCES, unix.EPERM:
		return "not permitted: run as root, grant CAP_PERFMON, or lower /proc/sys/kernel/perf_event_paranoid (now " + paranoid() + ")"
	case unix.ENOSYS:
		return "the kernel was built without perf events (CONFIG_PERF_EVENTS)"
	case unix.EMFILE:
		return "out of file descriptors: raise the open-files limit (ulimit -n)"
	case unix.EINVAL:
		return "the kernel rejected the event attributes"
	default:
		return errno.Error()
	}
}

func paranoid() string {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}
