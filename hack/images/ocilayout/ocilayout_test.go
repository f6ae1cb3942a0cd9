package ocilayout

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// readArchive returns every regular file and directory of a tar archive by name.
func readArchive(t *testing.T, data []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, headers
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		if _, dup := headers[hdr.Name]; dup {
			t.Fatalf("archive holds %s twice", hdr.Name)
		}
		files[hdr.Name] = body
		headers[hdr.Name] = hdr
	}
}

func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	data, ok := files[blobPath(d.Digest)]
	if !ok {
		t.Fatalf("archive lacks blob %s (%s)", d.Digest, d.MediaType)
	}
	sum := sha256.Sum256(data)
	if got := digestOf(sum[:]); got != d.Digest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: content has digest %s and size %d, descriptor says size %d", d.Digest, got, len(data), d.Size)
	}
	return data
}

func writeSource(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteProducesImportableLayout(t *testing.T) {
	pause := writeSource(t, "pause", "#!pause binary")
	lister := writeSource(t, "lister", "lister binary")
	img := Image{
		Name: "localhost/finegrain-worker:dev",
		Files: []File{
			{Path: "/usr/local/bin/pause", Source: pause, Mode: 0o755},
			{Path: "/usr/local/bin/lister", Source: lister, Mode: 0o700},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{"/usr/local/bin/pause"},
		Env:        []string{"PATH=/usr/local/bin"},
		Labels:     map[string]string{"org.opencontainers.image.title": "worker"},
	}
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		t.Fatalf("Write: %v", err)
	}
	files, _ := readArchive(t, buf.Bytes())

	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %s", got)
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if idx.SchemaVersion != 2 || len(idx.Manifests) != 1 {
		t.Fatalf("index = %+v, want schema 2 with one manifest", idx)
	}
	md := idx.Manifests[0]
	wantAnn := map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": "dev"}
	if diff := cmp.Diff(wantAnn, md.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	if md.MediaType != MediaTypeManifest || md.Platform == nil || md.Platform.OS != "linux" {
		t.Errorf("manifest descriptor = %+v", md)
	}
	var man manifest
	if err := json.Unmarshal(blob(t, files, md), &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if len(man.Layers) != 1 || man.Layers[0].MediaType != MediaTypeLayer || man.Config.MediaType != MediaTypeConfig {
		t.Fatalf("manifest = %+v", man)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	if diff := cmp.Diff([]string{man.Layers[0].Digest}, cfg.RootFS.DiffIDs); diff != "" {
		t.Errorf("config diff_ids must name the uncompressed layer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(execConfig{Entrypoint: img.Entrypoint, Env: img.Env, Labels: img.Labels}, cfg.Config); diff != "" {
		t.Errorf("exec config (-want +got):\n%s", diff)
	}

	layerFiles, layerHeaders := readArchive(t, blob(t, files, man.Layers[0]))
	var names []string
	for n := range layerHeaders {
		names = append(names, n)
	}
	wantNames := []string{"tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/lister", "usr/local/bin/pause"}
	if diff := cmp.Diff(wantNames, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
	if got := string(layerFiles["usr/local/bin/pause"]); got != "#!pause binary" {
		t.Errorf("pause content = %q", got)
	}
	modes := map[string]int64{"tmp/": 0o1777, "usr/": 0o755, "usr/local/bin/lister": 0o700, "usr/local/bin/pause": 0o755}
	for name, want := range modes {
		if got := layerHeaders[name].Mode; got != want {
			t.Errorf("mode of %s = %o, want %o", name, got, want)
		}
		if layerHeaders[name].Uid != 0 || !layerHeaders[name].ModTime.Equal(epoch) {
			t.Errorf("%s: uid %d mtime %v, want root and the epoch", name, layerHeaders[name].Uid, layerHeaders[name].ModTime)
		}
	}
}

// writeTar writes a tar archive holding the given regular files and returns its path.
func writeTar(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Size: int64(len(files[n])), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteStacksBaseLayersUnderTheFiles(t *testing.T) {
	rootfs := writeTar(t, map[string]string{"./etc/os-release": "ID=debian\n", "./bin/sh": "shell"})
	extra := writeTar(t, map[string]string{"./etc/extra": "more"})
	entry := writeSource(t, "entry", "entrypoint binary")
	img := Image{
		Name:       "localhost/finegrain-mpi:dev",
		BaseLayers: []string{rootfs, extra},
		Files:      []File{{Path: "/usr/local/bin/entry", Source: entry, Mode: 0o755}},
		Entrypoint: []string{"/usr/local/bin/entry"},
		WorkingDir: "/root",
	}
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		t.Fatalf("Write: %v", err)
	}
	files, _ := readArchive(t, buf.Bytes())
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	var man manifest
	if err := json.Unmarshal(blob(t, files, idx.Manifests[0]), &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if len(man.Layers) != 3 {
		t.Fatalf("manifest has %d layers, want the two base layers and the files layer", len(man.Layers))
	}
	for i, src := range []string{rootfs, extra} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := blob(t, files, man.Layers[i]); !bytes.Equal(got, want) {
			t.Errorf("layer %d is not base layer %s byte for byte", i, src)
		}
	}
	top, _ := readArchive(t, blob(t, files, man.Layers[2]))
	if got := string(top["usr/local/bin/entry"]); got != "entrypoint binary" {
		t.Errorf("top layer's entrypoint = %q", got)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	wantDiffIDs := []string{man.Layers[0].Digest, man.Layers[1].Digest, man.Layers[2].Digest}
	if diff := cmp.Diff(wantDiffIDs, cfg.RootFS.DiffIDs); diff != "" {
		t.Errorf("diff_ids must list the layers bottom first (-want +got):\n%s", diff)
	}
	if cfg.Config.WorkingDir != "/root" {
		t.Errorf("WorkingDir = %q, want /root", cfg.Config.WorkingDir)
	}

	onlyBase := Image{Name: "localhost/base:dev", BaseLayers: []string{rootfs}}
	buf.Reset()
	if err := Write(&buf, onlyBase); err != nil {
		t.Fatalf("Write of an image with only a base layer: %v", err)
	}
	files, _ = readArchive(t, buf.Bytes())
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blob(t, files, idx.Manifests[0]), &man); err != nil {
		t.Fatal(err)
	}
	if len(man.Layers) != 1 {
		t.Errorf("image with only a base layer has %d layers, want 1", len(man.Layers))
	}
}

func TestWriteIsReproducible(t *testing.T) {
	src := writeSource(t, "bin", strings.Repeat("x", 70000))
	img := Image{Name: "localhost/a:b", Files: []File{{Path: "/bin/a", Source: src, Mode: 0o755}}, Entrypoint: []string{"/bin/a"}}
	var first, second bytes.Buffer
	if err := Write(&first, img); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(src, epoch.AddDate(30, 0, 0), epoch.AddDate(30, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := Write(&second, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two archives of the same image differ")
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	src := writeSource(t, "bin", "x")
	cases := []struct {
		name  string
		img   Image
		wants string
	}{
		{"no tag", Image{Name: "localhost/pause", Files: []File{{Path: "/p", Source: src}}}, "must be a reference with a tag"},
		{"port is not a tag", Image{Name: "localhost:5000/pause", Files: []File{{Path: "/p", Source: src}}}, "must be a reference with a tag"},
		{"digest", Image{Name: "a@sha256:00:x", Files: []File{{Path: "/p", Source: src}}}, "must be a reference with a tag"},
		{"no files", Image{Name: "a:b"}, "has no files and no base layer"},
		{"missing base layer", Image{Name: "a:b", BaseLayers: []string{filepath.Join(t.TempDir(), "absent.tar")}}, "base layer"},
		{"compressed base layer", Image{Name: "a:b", BaseLayers: []string{writeSource(t, "rootfs.tar.gz", "\x1f\x8b\x08\x00 not a tar")}}, "not an uncompressed tar archive"},
		{"base layer twice", Image{Name: "a:b", BaseLayers: []string{writeTar(t, map[string]string{"a": "1"}), writeTar(t, map[string]string{"a": "1"})}}, "two identical layers"},
		{"relative path", Image{Name: "a:b", Files: []File{{Path: "bin/p", Source: src}}}, "must be absolute and clean"},
		{"unclean path", Image{Name: "a:b", Files: []File{{Path: "/bin/../p", Source: src}}}, "must be absolute and clean"},
		{"root", Image{Name: "a:b", Files: []File{{Path: "/", Mode: fs.ModeDir}}}, "must be absolute and clean"},
		{"twice", Image{Name: "a:b", Files: []File{{Path: "/p", Source: src}, {Path: "/p", Source: src}}}, "given twice"},
		{"dir with source", Image{Name: "a:b", Files: []File{{Path: "/d", Source: src, Mode: fs.ModeDir}}}, "a directory has no source"},
		{"file without source", Image{Name: "a:b", Files: []File{{Path: "/f"}}}, "a file needs one"},
		{"file as parent", Image{Name: "a:b", Files: []File{{Path: "/f", Source: src}, {Path: "/f/g", Source: src}}}, "both a file and the parent"},
		{"missing source", Image{Name: "a:b", Files: []File{{Path: "/f", Source: filepath.Join(t.TempDir(), "absent")}}}, "open source of /f"},
		{"directory source", Image{Name: "a:b", Files: []File{{Path: "/f", Source: t.TempDir()}}}, "is not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(io.Discard, tc.img)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("Write error = %v, want one containing %q", err, tc.wants)
			}
		})
	}
}

func FuzzTagOf(f *testing.F) {
	for _, s := range []string{"localhost/finegrain:dev", "a:b", "localhost:5000/x", "x", "", ":", "a/b:", "a:b@sha256:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tag, err := tagOf(name)
		if err != nil {
			return
		}
		if tag == "" || strings.Contains(tag, "/") || !strings.HasSuffix(name, ":"+tag) {
			t.Fatalf("tagOf(%q) = %q, not the part after the last colon", name, tag)
		}
	})
}
