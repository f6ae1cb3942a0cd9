package vm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requireCPIO(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio is not installed (Debian cpio); it is the reference reader for the archives")
	}
}

// TestCPIOReadByGNUCpio writes an archive and reads it back with GNU cpio, an independent reader
// of the newc format.
func TestCPIOReadByGNUCpio(t *testing.T) {
	requireCPIO(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	big := bytes.Repeat([]byte("0123456789abcdef"), 70_000) // not a multiple of 4 after the cut
	big = big[:len(big)-3]
	if err := os.WriteFile(src, big, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := newCPIOWriter(&buf)
	steps := []error{
		w.Dir("d"),
		w.Bytes("d/odd", 0o640, []byte("abc")),
		w.File("d/big", 0o755, src),
		w.CharDev("console", 0o600, 5, 1),
		w.Bytes("empty", 0o644, nil),
		w.Close(),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	list := exec.Command("cpio", "-itv", "--quiet")
	list.Stdin = bytes.NewReader(buf.Bytes())
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	for _, want := range []string{"drwxr-xr-x", "-rw-r-----", "-rwxr-xr-x", "crw-------", " d/odd", " d/big", " console", " empty"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cpio listing lacks %q:\n%s", want, out)
		}
	}
	dst := filepath.Join(dir, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	extract := exec.Command("cpio", "-id", "--quiet", "d", "d/odd", "d/big", "empty")
	extract.Dir = dst
	extract.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	for name, want := range map[string][]byte{"d/odd": []byte("abc"), "d/big": big, "empty": {}} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes back, want %d", name, len(got), len(want))
		}
	}
}

func TestInitramfsHoldsJobsAndTestdata(t *testing.T) {
	requireCPIO(t)
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	for _, d := range []string{"testdata/trees/a", "notdata"} {
		if err := os.MkdirAll(filepath.Join(pkg, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"testdata/trees/a/online", "notdata/x", "fake.test", "busybox", "brd.ko"} {
		if err := os.WriteFile(filepath.Join(pkg, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := Lookup("v1-2numa-smt")
	bins := []guestBinary{{job: Job{Package: "./pkg/foo", Args: []string{"-test.run", "Test'Quoted"}}, host: filepath.Join(pkg, "fake.test"), name: "pkg_foo.test", srcDir: pkg}}
	img := filepath.Join(dir, "initrd.cpio")
	if err := writeInitramfs(img, cfg, bins, filepath.Join(pkg, "busybox"), filepath.Join(pkg, "brd.ko"), "N0NCE", time.Minute); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	list := exec.Command("cpio", "-it", "--quiet")
	list.Stdin = f
	out, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := "\n" + string(out)
	for _, want := range []string{"\ninit\n", "\nbin/busybox\n", "\ndev/console\n", "\nfinegrain/vm.json\n",
		"\nfinegrain/bin/pkg_foo.test\n", "\nfinegrain/src/pkg/foo/testdata/trees/a/online\n", "\nlib/modules/brd.ko\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("initramfs lacks %q:\n%s", strings.TrimSpace(want), out)
		}
	}
	if strings.Contains(got, "notdata") {
		t.Errorf("initramfs holds package files outside testdata:\n%s", out)
	}
	helper := guestBinary{job: Job{Package: "./pkg/helper", Program: true, Helper: true}, name: "pkg_helper.bin"}
	script := initScript(cfg, append(bins, helper), true, "N0NCE", time.Minute)
	if strings.Contains(script, "pkg_helper.bin") {
		t.Errorf("init script runs the helper:\n%s", script)
	}
	for _, want := range []string{
		"insmod /lib/modules/brd.ko rd_nr=1 rd_size=16384",
		"mount -t cgroup -o $h cgroup /sys/fs/cgroup/$h",
		"export FINEGRAIN_VM=v1-2numa-smt FINEGRAIN_VM_SPEC=/finegrain/vm.json",
		`'/finegrain/bin/pkg_foo.test' '-test.v' '-test.count=1' '-test.timeout=1m0s' '-test.run' 'Test'\''Quoted'`,
		"echo @@fgvm:N0NCE:end:0:$?",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("init script lacks %q:\n%s", want, script)
		}
	}
}
