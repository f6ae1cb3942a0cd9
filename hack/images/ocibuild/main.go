// Command ocibuild writes a single-layer OCI image archive for `ctr images import` from files on
// disk (see package ocilayout). hack/images/build.sh uses it to build the local cluster's images.
//
//	ocibuild -name localhost/finegrain-pause:dev -o pause.tar -entrypoint /pause /pause=_output/images/bin/pause
//
// Each argument IMAGE_PATH=SOURCE copies SOURCE to IMAGE_PATH with SOURCE's permission bits;
// -dir PATH adds an empty world-writable sticky directory such as /tmp. -layer TAR puts an existing
// uncompressed layer tarball, such as a root file system from mmdebstrap, under those files:
//
//	ocibuild -name localhost/finegrain-mpi:dev -o mpi.tar -layer rootfs.tar -workdir /root \
//	    -entrypoint /usr/local/bin/mpi-entrypoint /usr/local/bin/mpi-entrypoint=bin/mpi-entrypoint
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/finegrain-dev/finegrain/hack/images/ocilayout"
)

type options struct {
	name       string
	output     string
	entrypoint string
	workdir    string
	layers     []string
	env        []string
	dirs       []string
	files      []string
}

type listFlag struct{ values *[]string }

func (l listFlag) String() string     { return "" }
func (l listFlag) Set(v string) error { *l.values = append(*l.values, v); return nil }

func main() {
	var opts options
	fl := flag.NewFlagSet("ocibuild", flag.ExitOnError)
	fl.StringVar(&opts.name, "name", "", "image reference with a tag, e.g. localhost/finegrain-pause:dev")
	fl.StringVar(&opts.output, "o", "", "archive to write")
	fl.StringVar(&opts.entrypoint, "entrypoint", "", "path of the program the image runs by default")
	fl.StringVar(&opts.workdir, "workdir", "", "working directory of the image's processes, e.g. /root")
	fl.Var(listFlag{&opts.layers}, "layer", "uncompressed layer tarball to put under the files, bottom first (repeatable)")
	fl.Var(listFlag{&opts.env}, "env", "KEY=VALUE set in the image (repeatable)")
	fl.Var(listFlag{&opts.dirs}, "dir", "empty world-writable sticky directory to create, e.g. /tmp (repeatable)")
	fl.Usage = func() {
		fmt.Fprintln(fl.Output(), "usage: ocibuild -name REF -o FILE [-layer TAR]... [-entrypoint PATH] [-workdir DIR] [-env K=V]... [-dir PATH]... IMAGE_PATH=SOURCE...")
		fl.PrintDefaults()
	}
	_ = fl.Parse(os.Args[1:])
	opts.files = fl.Args()
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "ocibuild:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	if opts.output == "" {
		return fmt.Errorf("no -o archive given for image %q", opts.name)
	}
	img := ocilayout.Image{Name: opts.name, BaseLayers: opts.layers, Env: opts.env, WorkingDir: opts.workdir}
	if opts.entrypoint != "" {
		img.Entrypoint = []string{opts.entrypoint}
	}
	for _, d := range opts.dirs {
		img.Files = append(img.Files, ocilayout.File{Path: d, Mode: fs.ModeDir | fs.ModeSticky | 0o777})
	}
	for _, arg := range opts.files {
		dst, src, ok := strings.Cut(arg, "=")
		if !ok || dst == "" || src == "" {
			return fmt.Errorf("argument %q for image %q is not IMAGE_PATH=SOURCE", arg, opts.name)
		}
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("source of %s in image %q: %w", dst, opts.name, err)
		}
		img.Files = append(img.Files, ocilayout.File{Path: dst, Source: src, Mode: st.Mode().Perm()})
	}
	tmp := opts.output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create archive for image %q: %w", opts.name, err)
	}
	werr := ocilayout.Write(f, img)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp)
		if werr != nil {
			return werr
		}
		return fmt.Errorf("write archive %s of image %q: %w", tmp, opts.name, cerr)
	}
	if err := os.Rename(tmp, opts.output); err != nil {
		return fmt.Errorf("move archive of image %q into place: %w", opts.name, err)
	}
	return nil
}
