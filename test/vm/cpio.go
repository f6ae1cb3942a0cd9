package vm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"syscall"
)

// cpioWriter writes an uncompressed "newc" cpio archive, the format the kernel unpacks into its
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst). All entries are owned by
// root with mtime 0, so the same inputs give the same archive.
type cpioWriter struct {
	w   *bufio.Writer
	off int64
	ino int
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20), ino: 1}
}

func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor int) error {
	if size > 0xffffffff {
		return fmt.Errorf("cpio entry %s is %d bytes, newc holds at most 4 GiB", name, size)
	}
	nlink := 1
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.ino++
	if err := c.write([]byte(hdr)); err != nil {
		return err
	}
	if err := c.write(append([]byte(name), 0)); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.off += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if rem := c.off % 4; rem != 0 {
		return c.write(make([]byte, 4-rem))
	}
	return nil
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string) error {
	return c.header(name, syscall.S_IFDIR|0o755, 0, 0, 0)
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm uint32, major, minor int) error {
	return c.header(name, syscall.S_IFCHR|perm, 0, major, minor)
}

// Bytes adds a regular file with the given content.
func (c *cpioWriter) Bytes(name string, perm uint32, data []byte) error {
	if err := c.header(name, syscall.S_IFREG|perm, int64(len(data)), 0, 0); err != nil {
		return err
	}
	if err := c.write(data); err != nil {
		return err
	}
	return c.pad()
}

// File adds a regular file copied from the host file src.
func (c *cpioWriter) File(name string, perm uint32, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := c.header(name, syscall.S_IFREG|perm, st.Size(), 0, 0); err != nil {
		return err
	}
	n, err := io.Copy(c.w, f)
	c.off += n
	if err != nil {
		return fmt.Errorf("copy %s into the archive: %w", src, err)
	}
	if n != st.Size() {
		return fmt.Errorf("%s changed size while being archived", src)
	}
	return c.pad()
}

// Close writes the trailer and flushes; it does not close the underlying writer.
func (c *cpioWriter) Close() error {
	if err := c.header("TRAILER!!!", 0, 0, 0, 0); err != nil {
		return err
	}
	return c.w.Flush()
}
