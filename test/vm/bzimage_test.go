package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBzImage lays out a bzImage the way the boot protocol describes it: one setup sector after
// the boot sector, then the protected-mode part holding the payload at payloadOffset.
func fakeBzImage(payload []byte) []byte {
	const setupSects, payloadOffset = 1, 16
	img := make([]byte, (setupSects+1)*512+payloadOffset+len(payload)+32)
	img[0x1f1] = setupSects
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x206:], 0x020f)
	binary.LittleEndian.PutUint32(img[0x248:], payloadOffset)
	binary.LittleEndian.PutUint32(img[0x24c:], uint32(len(payload)))
	copy(img[(setupSects+1)*512+payloadOffset:], payload)
	return img
}

func gzipped(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBzImageGzipPayload(t *testing.T) {
	kernel := bytes.Repeat([]byte("not really a kernel "), 1000)
	p, err := parseBzImage(fakeBzImage(gzipped(t, kernel)))
	if err != nil {
		t.Fatal(err)
	}
	if p.format.name != "gzip" || p.size != uint32(len(kernel)) {
		t.Errorf("payload format %s size %d, want gzip %d", p.format.name, p.size, len(kernel))
	}
	var out bytes.Buffer
	if err := decompress(context.Background(), p, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), kernel) {
		t.Errorf("decompressed %d bytes, want the %d-byte original", out.Len(), len(kernel))
	}
}

// TestBzImageXzPayload builds the payload the way the kernel's build does for xz: the stream,
// then the uncompressed size as 4 little-endian bytes.
func TestBzImageXzPayload(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz is not installed (Debian xz-utils)")
	}
	kernel := bytes.Repeat([]byte("\x7fELF pretend "), 5000)
	cmd := exec.Command("xz", "--format=xz", "--check=crc32", "-c")
	cmd.Stdin = bytes.NewReader(kernel)
	stream, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	payload := binary.LittleEndian.AppendUint32(stream, uint32(len(kernel)))
	p, err := parseBzImage(fakeBzImage(payload))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := decompress(context.Background(), p, &out); err != nil {
		t.Fatal(err)
	}
	if p.format.name != "xz" || !bytes.Equal(out.Bytes(), kernel) {
		t.Errorf("format %s, %d bytes out; want xz and the %d-byte original", p.format.name, out.Len(), len(kernel))
	}
}

func TestBzImageErrors(t *testing.T) {
	good := fakeBzImage(gzipped(t, []byte("x")))
	oldProtocol := bytes.Clone(good)
	binary.LittleEndian.PutUint16(oldProtocol[0x206:], 0x0204)
	outside := bytes.Clone(good)
	binary.LittleEndian.PutUint32(outside[0x24c:], 1<<30)
	lz4 := fakeBzImage([]byte{0x02, 0x21, 0x4c, 0x18, 1, 2, 3, 4, 5})
	tests := map[string]struct {
		img  []byte
		want string
	}{
		"empty":        {nil, "not an x86 bzImage"},
		"ELF":          {append([]byte("\x7fELF"), make([]byte, 1024)...), "not an x86 bzImage"},
		"old protocol": {oldProtocol, "older than 2.08"},
		"outside":      {outside, "lies outside"},
		"lz4":          {lz4, "02 21 4c 18 01 02"},
	}
	for name, tt := range tests {
		if _, err := parseBzImage(tt.img); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tt.want)
		}
	}
}

func TestExtractVmlinuxChecksELF(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(src, fakeBzImage(gzipped(t, []byte("not an ELF file at all"))), 0o644); err != nil {
		t.Fatal(err)
	}
	err := extractVmlinux(context.Background(), src, filepath.Join(dir, "vmlinux"))
	if err == nil || !strings.Contains(err.Error(), "not an ELF file") {
		t.Errorf("extract of a non-ELF payload: %v", err)
	}
}

// TestExtractVmlinuxChecksSize feeds an xz payload whose appended size disagrees with what the
// stream holds: a truncated or corrupt image.
func TestExtractVmlinuxChecksSize(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz is not installed (Debian xz-utils)")
	}
	cmd := exec.Command("xz", "--format=xz", "--check=crc32", "-c")
	cmd.Stdin = strings.NewReader("twenty bytes of data")
	stream, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(src, fakeBzImage(binary.LittleEndian.AppendUint32(stream, 4096)), 0o644); err != nil {
		t.Fatal(err)
	}
	err = extractVmlinux(context.Background(), src, filepath.Join(dir, "vmlinux"))
	if err == nil || !strings.Contains(err.Error(), "is 20 bytes, the image says 4096") {
		t.Errorf("extract with a wrong size trailer: %v", err)
	}
}

// TestCheckPVHOnCachedKernel checks the real Debian kernel `make test-vm` cached, when there is
// one, and a binary that is no kernel.
func TestCheckPVHOnCachedKernel(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPVH(exe); err == nil || !strings.Contains(err.Error(), "no PVH entry note") {
		t.Errorf("checkPVH(test binary) = %v, want a missing PVH note", err)
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Skip(err)
	}
	k, ok := newestCached(cache, "")
	if !ok {
		t.Skipf("no kernel cached under %s; `make test-vm` caches one", cache)
	}
	if err := checkPVH(k.Vmlinux); err != nil {
		t.Errorf("cached kernel %s: %v", k.Vmlinux, err)
	}
}

func FuzzParseBzImage(f *testing.F) {
	f.Add(fakeBzImage([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0}))
	f.Add(fakeBzImage([]byte{0xfd, '7', 'z', 'X', 'Z', 0, 0, 0}))
	f.Add([]byte("HdrS"))
	f.Fuzz(func(t *testing.T, img []byte) {
		p, err := parseBzImage(img)
		if err == nil && len(p.data) == 0 {
			t.Fatalf("accepted an empty payload")
		}
	})
}
