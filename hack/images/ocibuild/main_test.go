package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunWritesArchive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tool")
	if err := os.WriteFile(src, []byte("tool"), 0o750); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	err := run(options{name: "localhost/x:dev", output: out, entrypoint: "/bin/tool", dirs: []string{"/tmp"}, files: []string{"/bin/tool=" + src}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
	if len(names) != 7 || names[0] != "blobs/" || names[2] != "oci-layout" || names[3] != "index.json" {
		t.Errorf("archive entries = %v, want blobs/, blobs/sha256/, oci-layout, index.json and three blobs", names)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary archive left behind: %v", err)
	}
}

func TestRunPutsLayerUnderFiles(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "rootfs.tar")
	f, err := os.Create(layer)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./etc/", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "entry")
	if err := os.WriteFile(src, []byte("entry"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	err = run(options{name: "localhost/x:dev", output: out, layers: []string{layer}, workdir: "/root", entrypoint: "/bin/entry", files: []string{"/bin/entry=" + src}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	a, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	blobs := 0
	tr := tar.NewReader(a)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(hdr.Name, "blobs/sha256/") && hdr.Typeflag == tar.TypeReg {
			blobs++
		}
	}
	if blobs != 4 {
		t.Errorf("archive has %d blobs, want config, manifest, the given layer and the files layer", blobs)
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		opts  options
		wants string
	}{
		{options{name: "a:b"}, "no -o archive"},
		{options{name: "a:b", output: filepath.Join(dir, "o.tar"), files: []string{"/bin/tool"}}, "is not IMAGE_PATH=SOURCE"},
		{options{name: "a:b", output: filepath.Join(dir, "o.tar"), files: []string{"/bin/tool=" + filepath.Join(dir, "absent")}}, "source of /bin/tool"},
		{options{name: "nameless", output: filepath.Join(dir, "o.tar"), dirs: []string{"/tmp"}}, "must be a reference with a tag"},
	}
	for _, tc := range cases {
		err := run(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("run(%+v) = %v, want an error containing %q", tc.opts, err, tc.wants)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed runs left files behind: %v", entries)
	}
}
