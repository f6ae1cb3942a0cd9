package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newFile(t *testing.T, path string) *File {
	t.Helper()
	f, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWriteReadReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	f := newFile(t, filepath.Join(dir, "policy.json"))
	if _, err := f.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read before first write: error %v, want fs.ErrNotExist", err)
	}
	for _, content := range []string{"first", "second, longer content", ""} {
		if err := f.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := f.Read()
		if err != nil || string(got) != content {
			t.Fatalf("read = %q, %v; want %q", got, err, content)
		}
	}
	st, err := os.Stat(f.Path())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, %v; want 0600", st.Mode(), err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode = %v, %v; want 0700", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after writes, want only the checkpoint", len(entries))
	}
}

func TestWriteRemovesCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, filepath.Join(dir, "policy.json"))
	stale := filepath.Join(dir, ".policy.json.tmp-12345")
	other := filepath.Join(dir, ".other.json.tmp-1")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("half a checkp"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Write([]byte("whole")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file's temporary was removed: %v", err)
	}
}

func TestWriteFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, filepath.Join(dir, "policy.json"))
	if err := f.Write([]byte("old")); err != nil {
		t.Fatal(err)
	}
	// A directory where the file should go makes the rename fail after the temporary is written.
	blocked := newFile(t, filepath.Join(dir, "blocked"))
	if err := os.MkdirAll(filepath.Join(dir, "blocked", "child"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := blocked.Write([]byte("new"))
	if err == nil || !strings.Contains(err.Error(), "replace "+blocked.Path()) {
		t.Fatalf("write over a directory: error %v, want one naming %s", err, blocked.Path())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("failed write left %d entries, want the old file and the blocking directory", len(entries))
	}
	if got, err := f.Read(); err != nil || string(got) != "old" {
		t.Errorf("old checkpoint = %q, %v", got, err)
	}
	// A file where the directory should go.
	under := newFile(t, filepath.Join(f.Path(), "x.json"))
	if err := under.Write([]byte("x")); err == nil || !strings.Contains(err.Error(), "create directory") {
		t.Errorf("write beneath a file: error %v", err)
	}
}

func TestReadRejectsOversizedFile(t *testing.T) {
	f := newFile(t, filepath.Join(t.TempDir(), "policy.json"))
	if err := f.Write(bytes.Repeat([]byte("x"), MaxSize+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized read: error %v", err)
	}
}

func TestNewRejectsNonFilePaths(t *testing.T) {
	for _, p := range []string{"", "/", "."} {
		if _, err := New(p); err == nil {
			t.Errorf("New(%q) accepted a path that names no file", p)
		}
	}
}

// TestKilledWriterLeavesWholeVersion kills a real writer process with SIGKILL at arbitrary
// points and checks that the file always holds one complete version.
func TestKilledWriterLeavesWholeVersion(t *testing.T) {
	if os.Getenv("FINEGRAIN_CHECKPOINT_WRITER") != "" {
		return
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	versions := map[string]bool{}
	for v := byte('a'); v <= 'd'; v++ {
		versions[string(bytes.Repeat([]byte{v}, 1<<20))] = true
	}
	for round := 0; round < 8; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterHelper$")
		cmd.Env = append(os.Environ(), "FINEGRAIN_CHECKPOINT_WRITER="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(30+round*17) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		got, err := newFile(t, path).Read()
		if errors.Is(err, fs.ErrNotExist) {
			continue // killed before the first rename
		}
		if err != nil || !versions[string(got)] {
			t.Fatalf("round %d: after SIGKILL the file holds %d bytes starting %q (%v), not one whole version", round, len(got), got[:min(len(got), 8)], err)
		}
	}
}

// TestWriterHelper is the writer process of TestKilledWriterLeavesWholeVersion.
func TestWriterHelper(t *testing.T) {
	path := os.Getenv("FINEGRAIN_CHECKPOINT_WRITER")
	if path == "" {
		t.Skip("runs only as the writer process of TestKilledWriterLeavesWholeVersion")
	}
	f := newFile(t, path)
	for i := 0; ; i++ {
		if err := f.Write(bytes.Repeat([]byte{byte('a' + i%4)}, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
}
