// Package checkpoint owns the node agent's state file on disk: it replaces the file atomically
// and durably (a temporary file in the same directory, fsync, rename over the old file, fsync of
// the directory), so a crash or power cut leaves either the old or the new content, never a mix,
// and reads it back with a size bound. It stores bytes: it must not interpret them (pkg/policy
// encodes and validates the content).
package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// MaxSize bounds the file Read accepts; a checkpoint of thousands of containers is far smaller.
const MaxSize = 16 << 20

// File is one state file.
type File struct {
	path string
}

// New names the state file at path; it touches nothing on disk.
func New(path string) (*File, error) {
	if path == "" || filepath.Base(path) == "." || filepath.Base(path) == string(filepath.Separator) {
		return nil, fmt.Errorf("checkpoint file path %q does not name a file", path)
	}
	return &File{path: filepath.Clean(path)}, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Read returns the file's content. When the file does not exist the error wraps fs.ErrNotExist
// (test with errors.Is); the agent then starts without a checkpoint.
func (f *File) Read() ([]byte, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", f.path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("read checkpoint %s: larger than %d bytes; it is not a checkpoint this agent wrote", f.path, MaxSize)
	}
	return data, nil
}

// Write replaces the file's content with data atomically and durably, creating its directory
// (mode 0700) when missing. Temporary files left by an earlier crash are removed first. On error
// the old content is intact.
func (f *File) Write(data []byte) (err error) {
	dir, base := filepath.Split(f.path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write checkpoint %s: create directory: %w", f.path, err)
	}
	pattern := "." + base + ".tmp-"
	if stale, _ := filepath.Glob(filepath.Join(dir, globEscape(pattern)+"*")); len(stale) > 0 {
		for _, s := range stale {
			os.Remove(s) // leftovers of a crashed write; a failure here only leaves litter
		}
	}
	tmp, err := os.CreateTemp(dir, pattern+"*")
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", f.path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write checkpoint %s: fsync: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("write checkpoint: replace %s: %w", f.path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write checkpoint: open directory %s for fsync: %w", dir, err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("write checkpoint: fsync directory %s: %w", dir, err)
	}
	return nil
}

// globEscape quotes the glob metacharacters of a file name.
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
