package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// compression is a kernel payload format and how to undo it.
type compression struct {
	name  string
	magic []byte
	// tool decompresses stdin to stdout; empty means Go's own decoder (gzip).
	tool []string
	// sizeAppended is true when the kernel build appends the uncompressed size after the stream
	// (xz and zstd); gzip's own trailer already ends with it.
	sizeAppended bool
}

var compressions = []compression{
	{name: "xz", magic: []byte{0xfd, '7', 'z', 'X', 'Z', 0}, tool: []string{"xz", "-dc"}, sizeAppended: true},
	{name: "zstd", magic: []byte{0x28, 0xb5, 0x2f, 0xfd}, tool: []string{"zstd", "-dcq"}, sizeAppended: true},
	{name: "gzip", magic: []byte{0x1f, 0x8b}},
}

// bzPayload is the compressed kernel inside a bzImage.
type bzPayload struct {
	data   []byte
	format compression
	// size is the uncompressed size the image records.
	size uint32
}

// parseBzImage finds the compressed vmlinux inside an x86 bzImage (Documentation/arch/x86/boot
// rst: setup_sects at 0x1f1, "HdrS" at 0x202, payload_offset and payload_length at 0x248).
func parseBzImage(img []byte) (bzPayload, error) {
	const (
		setupSectsOff = 0x1f1
		magicOff      = 0x202
		versionOff    = 0x206
		payloadOff    = 0x248
		minVersion    = 0x208 // boot protocol 2.08 added payload_offset/length
	)
	if len(img) < payloadOff+8 || string(img[magicOff:magicOff+4]) != "HdrS" {
		return bzPayload{}, errors.New("not an x86 bzImage (no HdrS boot header)")
	}
	if v := binary.LittleEndian.Uint16(img[versionOff:]); v < minVersion {
		return bzPayload{}, fmt.Errorf("boot protocol %#x is older than 2.08 and does not locate its payload", v)
	}
	setup := int(img[setupSectsOff])
	if setup == 0 {
		setup = 4
	}
	start := uint64(setup+1)*512 + uint64(binary.LittleEndian.Uint32(img[payloadOff:]))
	length := uint64(binary.LittleEndian.Uint32(img[payloadOff+4:]))
	if length < 8 || start+length > uint64(len(img)) {
		return bzPayload{}, fmt.Errorf("payload at %d+%d lies outside the %d-byte image", start, length, len(img))
	}
	data := img[start : start+length]
	size := binary.LittleEndian.Uint32(data[len(data)-4:])
	for _, c := range compressions {
		if !bytes.HasPrefix(data, c.magic) {
			continue
		}
		if c.sizeAppended {
			data = data[:len(data)-4]
		}
		return bzPayload{data: data, format: c, size: size}, nil
	}
	return bzPayload{}, fmt.Errorf("payload compression with magic % x is not supported (xz, zstd, gzip are)", data[:min(6, len(data))])
}

// extractVmlinux decompresses the bzImage at src into an ELF vmlinux at dst and checks that qemu
// can boot it directly (a PVH entry note).
func extractVmlinux(ctx context.Context, src, dst string) error {
	img, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read kernel image: %w", err)
	}
	p, err := parseBzImage(img)
	if err != nil {
		return fmt.Errorf("kernel image %s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("create vmlinux: %w", err)
	}
	defer out.Close()
	if err := decompress(ctx, p, out); err != nil {
		return fmt.Errorf("decompress %s payload of %s: %w", p.format.name, src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write vmlinux %s: %w", dst, err)
	}
	st, err := os.Stat(dst)
	if err != nil {
		return fmt.Errorf("stat vmlinux: %w", err)
	}
	if uint32(st.Size()) != p.size {
		return fmt.Errorf("vmlinux from %s is %d bytes, the image says %d: truncated or corrupt payload", src, st.Size(), p.size)
	}
	return checkPVH(dst)
}

func decompress(ctx context.Context, p bzPayload, w io.Writer) error {
	if len(p.format.tool) == 0 {
		zr, err := gzip.NewReader(bytes.NewReader(p.data))
		if err != nil {
			return err
		}
		zr.Multistream(false)
		_, err = io.Copy(w, zr)
		return err
	}
	if _, err := exec.LookPath(p.format.tool[0]); err != nil {
		return fmt.Errorf("%s is not installed (Debian package %s-utils or %s): %w", p.format.tool[0], p.format.name, p.format.name, err)
	}
	cmd := exec.CommandContext(ctx, p.format.tool[0], p.format.tool[1:]...)
	cmd.Stdin = bytes.NewReader(p.data)
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", cmd, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// checkPVH verifies that vmlinux is an x86-64 ELF carrying the Xen PVH entry note qemu's -kernel
// needs to boot it without firmware decompression (CONFIG_PVH).
func checkPVH(path string) error {
	const xenElfnotePhys32Entry = 18
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("vmlinux %s is not an ELF file: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("vmlinux %s is for %s, want x86-64", path, f.Machine)
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(prog.Open())
		if err != nil {
			return fmt.Errorf("read notes of vmlinux %s: %w", path, err)
		}
		for len(notes) >= 12 {
			nameSize := int(binary.LittleEndian.Uint32(notes[0:]))
			descSize := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			name := notes[12:min(len(notes), 12+nameSize)]
			if typ == xenElfnotePhys32Entry && bytes.Equal(bytes.TrimRight(name, "\x00"), []byte("Xen")) {
				return nil
			}
			next := 12 + align4(nameSize) + align4(descSize)
			if next > len(notes) {
				break
			}
			notes = notes[next:]
		}
	}
	return fmt.Errorf("vmlinux %s has no PVH entry note: the kernel lacks CONFIG_PVH and qemu cannot boot it directly", path)
}

func align4(n int) int { return (n + 3) &^ 3 }
