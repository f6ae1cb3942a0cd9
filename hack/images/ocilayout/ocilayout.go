// Package ocilayout writes single-platform container images as OCI image-layout tar archives,
// the format `ctr images import` reads, so the local cluster can run images built here without a
// registry or a Docker engine. An image is an image config, a manifest and uncompressed layers:
// optionally existing layer tarballs (such as a Debian root file system made by mmdebstrap) at
// the bottom, then one layer made from files on disk. The index names the image through the
// io.containerd.image.name and org.opencontainers.image.ref.name annotations. The output is
// reproducible: the same inputs give the same bytes (no timestamps, sorted entries, root-owned
// files). The package only writes archives; it never talks to a container runtime.
package ocilayout

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image specification v1.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// File is one entry of the image's filesystem.
type File struct {
	// Path is where the entry appears in the image: absolute and clean, e.g. /usr/local/bin/pause.
	Path string
	// Source is the file on disk whose bytes go to Path; empty for a directory.
	Source string
	// Mode holds the permission bits; fs.ModeDir makes the entry a directory.
	Mode fs.FileMode
}

// Image describes what to write.
type Image struct {
	// Name is the full reference containerd gives the image, e.g. localhost/finegrain-pause:dev.
	Name string
	// BaseLayers are uncompressed layer tarballs on disk, bottom first, copied into the image
	// as they are; the layer made from Files goes on top of them.
	BaseLayers []string
	// Files make the top layer; an image with base layers may have none.
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Labels     map[string]string
}

// epoch is the modification time of every entry, so archives do not depend on when they were made.
var epoch = time.Unix(0, 0).UTC()

// layerBlob is a layer's descriptor and the file on disk that holds its bytes.
type layerBlob struct {
	desc   descriptor
	source string
}

// Write writes img to w as an OCI image-layout tar archive. Scratch space for the layer made from
// Files comes from os.CreateTemp and is removed before Write returns.
func Write(w io.Writer, img Image) error {
	tag, err := validate(img)
	if err != nil {
		return err
	}
	var layers []layerBlob
	for _, p := range img.BaseLayers {
		desc, err := describeLayerFile(p)
		if err != nil {
			return fmt.Errorf("base layer %s of image %q: %w", p, img.Name, err)
		}
		layers = append(layers, layerBlob{desc: desc, source: p})
	}
	if len(img.Files) > 0 {
		scratch, err := os.CreateTemp("", "ocilayout-layer-*.tar")
		if err != nil {
			return fmt.Errorf("create scratch file for the layer of image %q: %w", img.Name, err)
		}
		defer func() {
			scratch.Close()
			os.Remove(scratch.Name())
		}()
		h := sha256.New()
		size, err := writeLayer(io.MultiWriter(scratch, h), img.Files)
		if err != nil {
			return fmt.Errorf("build the layer of image %q: %w", img.Name, err)
		}
		desc := descriptor{MediaType: MediaTypeLayer, Digest: digestOf(h.Sum(nil)), Size: size}
		layers = append(layers, layerBlob{desc: desc, source: scratch.Name()})
	}
	seen := map[string]bool{}
	var layerDescs []descriptor
	var diffIDs []string
	for _, l := range layers {
		if seen[l.desc.Digest] {
			return fmt.Errorf("image %q has two identical layers (%s); give each layer once", img.Name, l.desc.Digest)
		}
		seen[l.desc.Digest] = true
		layerDescs = append(layerDescs, l.desc)
		// Uncompressed layers: the diff ID is the layer's digest.
		diffIDs = append(diffIDs, l.desc.Digest)
	}

	config, err := json.Marshal(imageConfig{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: execConfig{
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			Env:        img.Env,
			WorkingDir: img.WorkingDir,
			Labels:     img.Labels,
		},
		RootFS: rootFS{Type: "layers", DiffIDs: diffIDs},
	})
	if err != nil {
		return fmt.Errorf("encode the config of image %q: %w", img.Name, err)
	}
	configDesc := blobDescriptor(MediaTypeConfig, config)

	manifestJSON, err := json.Marshal(manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        configDesc,
		Layers:        layerDescs,
	})
	if err != nil {
		return fmt.Errorf("encode the manifest of image %q: %w", img.Name, err)
	}
	manifestDesc := blobDescriptor(MediaTypeManifest, manifestJSON)
	manifestDesc.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          img.Name,
		"org.opencontainers.image.ref.name": tag,
	}
	indexJSON, err := json.Marshal(index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []descriptor{manifestDesc}})
	if err != nil {
		return fmt.Errorf("encode the index of image %q: %w", img.Name, err)
	}

	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
		{blobPath(configDesc.Digest), config},
		{blobPath(manifestDesc.Digest), manifestJSON},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
			return fmt.Errorf("write %s of image %q: %w", dir, img.Name, err)
		}
	}
	for _, e := range entries {
		if err := writeBytes(tw, e.name, e.data); err != nil {
			return fmt.Errorf("write %s of image %q: %w", e.name, img.Name, err)
		}
	}
	for _, l := range layers {
		if err := copyBlob(tw, l); err != nil {
			return fmt.Errorf("write layer %s of image %q: %w", l.desc.Digest, img.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish the archive of image %q: %w", img.Name, err)
	}
	return nil
}

// describeLayerFile reads a layer tarball once: it checks that the file is an uncompressed tar
// archive and returns its descriptor.
func describeLayerFile(p string) (descriptor, error) {
	f, err := os.Open(p)
	if err != nil {
		return descriptor{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countingWriter{w: h}
	tr := tar.NewReader(io.TeeReader(f, cw))
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return descriptor{}, fmt.Errorf("not an uncompressed tar archive (%w); a layer must be a plain .tar", err)
		}
	}
	// The end-of-archive blocks and any padding after them belong to the layer's bytes too.
	if _, err := io.Copy(cw, f); err != nil {
		return descriptor{}, err
	}
	return descriptor{MediaType: MediaTypeLayer, Digest: digestOf(h.Sum(nil)), Size: cw.n}, nil
}

// copyBlob writes the layer file as its blob; the file must still have the size it was
// described with.
func copyBlob(tw *tar.Writer, l layerBlob) error {
	f, err := os.Open(l.source)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: blobPath(l.desc.Digest), Size: l.desc.Size, Mode: 0o644, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return err
	}
	if n != l.desc.Size {
		return fmt.Errorf("%s changed size while the archive was written", l.source)
	}
	return nil
}

// validate checks the image description and returns the tag of its name.
func validate(img Image) (string, error) {
	tag, err := tagOf(img.Name)
	if err != nil {
		return "", err
	}
	if len(img.Files) == 0 && len(img.BaseLayers) == 0 {
		return "", fmt.Errorf("image %q has no files and no base layer; give it at least its entrypoint binary", img.Name)
	}
	seen := make(map[string]bool, len(img.Files))
	for _, f := range img.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return "", fmt.Errorf("file %q of image %q: the path inside the image must be absolute and clean, like /usr/local/bin/tool", f.Path, img.Name)
		}
		if seen[f.Path] {
			return "", fmt.Errorf("file %q of image %q is given twice", f.Path, img.Name)
		}
		seen[f.Path] = true
		if f.Mode.IsDir() != (f.Source == "") {
			return "", fmt.Errorf("file %q of image %q: a directory has no source and a file needs one", f.Path, img.Name)
		}
	}
	return tag, nil
}

// tagOf returns the tag of a reference such as localhost/name:tag, which must carry one.
func tagOf(name string) (string, error) {
	slash := strings.LastIndex(name, "/")
	colon := strings.LastIndex(name, ":")
	if name == "" || colon <= slash || colon == len(name)-1 || strings.ContainsAny(name, " \t\n@") {
		return "", fmt.Errorf("image name %q must be a reference with a tag, like localhost/finegrain-pause:dev", name)
	}
	return name[colon+1:], nil
}

// writeLayer writes the layer tar of files to w: every parent directory once, then the entries in
// path order. It returns the layer's size.
func writeLayer(w io.Writer, files []File) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	dirs := map[string]fs.FileMode{}
	byPath := map[string]File{}
	for _, f := range files {
		byPath[f.Path] = f
		if f.Mode.IsDir() {
			dirs[f.Path] = f.Mode
		}
		for p := path.Dir(f.Path); p != "/"; p = path.Dir(p) {
			if _, ok := dirs[p]; !ok {
				dirs[p] = fs.ModeDir | 0o755
			}
		}
	}
	var names []string
	for p := range dirs {
		names = append(names, p)
	}
	for p, f := range byPath {
		if !f.Mode.IsDir() {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		name := strings.TrimPrefix(p, "/")
		if mode, ok := dirs[p]; ok {
			if f, given := byPath[p]; given && !f.Mode.IsDir() {
				return 0, fmt.Errorf("%s is both a file and the parent directory of another entry", p)
			}
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: tarMode(mode), ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return 0, fmt.Errorf("write directory %s: %w", p, err)
			}
			continue
		}
		if err := copyFile(tw, name, byPath[p]); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, fmt.Errorf("finish the layer: %w", err)
	}
	return cw.n, nil
}

func copyFile(tw *tar.Writer, name string, f File) error {
	src, err := os.Open(f.Source)
	if err != nil {
		return fmt.Errorf("open source of %s: %w", f.Path, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return fmt.Errorf("stat source of %s: %w", f.Path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("source %s of %s is not a regular file", f.Source, f.Path)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: tarMode(f.Mode), ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write header of %s: %w", f.Path, err)
	}
	n, err := io.Copy(tw, src)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", f.Source, f.Path, err)
	}
	if n != st.Size() {
		return fmt.Errorf("source %s of %s changed size while it was copied", f.Source, f.Path)
	}
	return nil
}

// tarMode turns permission bits and the sticky bit (which /tmp needs) into a tar header mode.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func writeBytes(tw *tar.Writer, name string, data []byte) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func blobDescriptor(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	return descriptor{MediaType: mediaType, Digest: digestOf(sum[:]), Size: int64(len(data))}
}

func digestOf(sum []byte) string { return "sha256:" + hex.EncodeToString(sum) }

func blobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = errors.New("short write")
	}
	return n, err
}
