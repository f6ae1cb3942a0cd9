package topology

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// ErrInconsistent marks a topology whose sysfs files contradict each other (a CPU in two NUMA
// nodes, thread siblings that disagree with core IDs, ...). Test with errors.Is.
var ErrInconsistent = errors.New("sysfs files contradict each other")

// FileError reports a sysfs file that is missing, unreadable or not in the format the kernel
// writes. Path is the full path; Want says what the file should hold.
type FileError struct {
	Path string
	Want string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("sysfs file %s: want %s: %v", e.Path, e.Want, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// sysfs reads small attribute files under a root with one reused buffer and plain
// open/read/close system calls: discovery reads hundreds of files, and os.ReadFile's extra stat,
// poller registration and per-file allocation would dominate its cost.
type sysfs struct {
	root string
	buf  []byte
	// trace, when set, is told every file that was read successfully (tests use it to check that
	// fixtures hold exactly the files discovery needs).
	trace func(path string)
}

func newSysfs(root string) *sysfs {
	return &sysfs{root: root, buf: make([]byte, 16<<10)}
}

// read returns the contents of a file; the slice is valid until the next read. A missing or
// unreadable file yields a *FileError wrapping the system error (errors.Is(err, fs.ErrNotExist)
// holds for a missing one).
func (s *sysfs) read(path, want string) ([]byte, error) {
	fd, err := openRetry(path)
	if err != nil {
		return nil, &FileError{Path: path, Want: want, Err: err}
	}
	// A short read is the end of the file: sysfs returns an attribute in one read, and so does a
	// regular file (a fixture). Only a full buffer needs another read.
	n := 0
	for {
		m, err := readRetry(fd, s.buf[n:])
		if err != nil {
			_ = unix.Close(fd)
			return nil, &FileError{Path: path, Want: want, Err: err}
		}
		n += m
		if n < len(s.buf) {
			break
		}
		s.buf = append(s.buf, make([]byte, len(s.buf))...)
	}
	if err := unix.Close(fd); err != nil {
		return nil, &FileError{Path: path, Want: want, Err: err}
	}
	if s.trace != nil {
		s.trace(path)
	}
	return s.buf[:n], nil
}

func openRetry(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func readRetry(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// exists reports whether path exists (as a file or directory).
func exists(path string) (bool, error) {
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
}

// list reads a kernel-list file.
func (s *sysfs) list(path string) (cpuset.CPUSet, error) {
	data, err := s.read(path, wantList)
	if err != nil {
		return cpuset.New(), err
	}
	set, err := parseListFile(data)
	if err != nil {
		return cpuset.New(), &FileError{Path: path, Want: wantList, Err: err}
	}
	return set, nil
}

// nonNegInt reads a file holding one non-negative integer.
func (s *sysfs) nonNegInt(path string) (int, error) {
	data, err := s.read(path, wantNonNegInt)
	if err != nil {
		return 0, err
	}
	n, err := parseIntFile(data)
	if err == nil && n < 0 {
		err = fmt.Errorf("%d is negative (the kernel does not know this value)", n)
	}
	if err != nil {
		return 0, &FileError{Path: path, Want: wantNonNegInt, Err: err}
	}
	return n, nil
}

// optionalNonNegInt is nonNegInt for an attribute older kernels lack; ok is false when the file
// does not exist.
func (s *sysfs) optionalNonNegInt(path string) (n int, ok bool, err error) {
	n, err = s.nonNegInt(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return n, err == nil, err
}
