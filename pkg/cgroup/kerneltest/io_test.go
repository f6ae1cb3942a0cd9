package kerneltest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// readerEnv makes the test binary read a block device: "<device path>:<bytes>". It prints
// "ready", waits for a line on stdin (the test moves it into its cgroup meanwhile), reads the
// bytes with O_DIRECT from the start of the device, prints the nanoseconds it took and exits.
const readerEnv = "FINEGRAIN_IO_READER"

// ioChunk is the reader's request size (a multiple of every logical block size).
const ioChunk = 64 << 10

func readerMain(spec string) {
	dev, ns, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(ns)
	if err != nil || n < ioChunk {
		fmt.Fprintf(os.Stderr, "reader: bad spec %q\n", spec)
		os.Exit(2)
	}
	f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reader: %v\n", err)
		os.Exit(2)
	}
	// O_DIRECT needs an aligned buffer: a fresh anonymous mapping is page-aligned.
	buf, err := unix.Mmap(-1, 0, ioChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reader: %v\n", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(2)
	}
	start := time.Now()
	for off := int64(0); off < int64(n); off += ioChunk {
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintf(os.Stderr, "reader: %v\n", err)
			os.Exit(2)
		}
	}
	fmt.Println(time.Since(start).Nanoseconds())
}

// TestIOLimits writes a pod's I/O bandwidth limit on a whole disk (testDisk) and reads the kernel's own files back: cgroup v1's
// blkio.throttle.{read,write}_bps_device of each container (v1 throttling is flat), cgroup v2's
// io.max of the pod. A process in the container reading the disk with O_DIRECT is held to the
// limit; a second apply writes nothing, a limit rewritten behind the writer's back is repaired
// with one write, clearing removes the kernel's rule, and a device the kernel cannot throttle is
// refused with an error saying so.
func TestIOLimits(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) { testIOLimits(t, v) })
	}
}

func testIOLimits(t *testing.T, v cgroup.Version) {
	k := newKernel(t, v, cgroup.Cgroupfs)
	disk, devPath := testDisk(t)
	r := ref(t, uidS, "Burstable", idS1)
	k.addContainer(r)
	pod := r.Pod
	dirs, err := k.layout.IODirs(pod, []cgroup.ContainerID{r.Container})
	if errors.Is(err, cgroup.ErrControllerMissing) {
		t.Skipf("no blkio hierarchy: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := dirs[0]
	if v == cgroup.V1 {
		k.mkdirAll(dir)
	} else {
		k.delegateIO(dir)
	}

	lim := cgroup.IOLimit{ReadBPS: 1 << 20, WriteBPS: 2 << 20}
	res, err := k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{disk}, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) == 0 {
		t.Fatal("setting a limit wrote nothing")
	}
	k.wantIO(dir, disk, "1048576", "2097152")
	ctr := dir
	if v == cgroup.V2 {
		// v2 keeps processes in the leaves: the container's cgroup, below the pod's io.max.
		ctr = k.dirs(r)[0]
	}
	// 3 MiB at 1 MiB/s: the kernel lets the first slice through, the rest waits its turn.
	if took := k.timedRead(devPath, 3<<20, ctr); took < 1500*time.Millisecond {
		t.Errorf("reading 3 MiB of %s at a 1 MiB/s limit took %s, want at least 1.5 s", devPath, took)
	}
	if res, err := k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{disk}, lim); err != nil || len(res.Changes) != 0 {
		t.Errorf("re-applying: %v, %v; want no write", changes(res), err)
	}

	if v == cgroup.V1 {
		k.write(dir, "blkio.throttle.read_bps_device", disk.String()+" 4096")
	} else {
		k.write(dir, "io.max", disk.String()+" rbps=4096")
	}
	res, err = k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{disk}, lim)
	if err != nil || len(res.Changes) != 1 {
		t.Errorf("repairing drift: %v, %v; want one write", changes(res), err)
	}
	k.wantIO(dir, disk, "1048576", "2097152")

	if _, err := k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{disk}, cgroup.IOLimit{}); err != nil {
		t.Fatal(err)
	}
	k.wantIO(dir, disk, "", "")
	got, err := k.fs.ReadIO(pod, dir)
	if err != nil || len(got) != 0 {
		t.Errorf("after clearing, ReadIO = %v, %v; want no limit", got, err)
	}

	// The largest major number: no driver registers it (brd and loop would create a missing
	// minor of theirs on demand).
	absent := cgroup.Device{Major: 1<<12 - 1, Minor: 0}
	_, err = k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{absent}, lim)
	if err == nil || !strings.Contains(err.Error(), "whole disks") {
		t.Errorf("device %s that does not exist: %v, want the kernel's refusal explained", absent, err)
	}
}

// testDisk returns a whole disk to throttle and read, and its /dev path: in the qemu guests the
// RAM disk their /init loads (brd.ko), elsewhere a loop device the test attaches to an 8 MiB
// file (detached at cleanup); it skips when there is neither.
func testDisk(t *testing.T) (cgroup.Device, string) {
	t.Helper()
	if raw, err := os.ReadFile("/sys/block/ram0/dev"); err == nil {
		d, err := cgroup.ParseDevice(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		return d, "/dev/ram0"
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no whole disk to throttle: no RAM disk (the qemu guests' /init loads brd.ko) and no loop devices (%v)", err)
	}
	defer ctl.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		t.Skipf("no free loop device: %v", err)
	}
	path := fmt.Sprintf("/dev/loop%d", n)
	backing, err := os.CreateTemp(t.TempDir(), "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	if err := backing.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	loop, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Skipf("cannot open %s: %v", path, err)
	}
	if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_FD, int(backing.Fd())); err != nil {
		loop.Close()
		t.Skipf("cannot attach %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0); err != nil {
			t.Errorf("detach %s: %v", path, err)
		}
		loop.Close()
	})
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return cgroup.Device{Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}, path
}

// timedRead runs a reader of n bytes of dev in the cgroup dir and returns how long the reads
// took.
func (k *kernel) timedRead(dev string, n int, dir string) time.Duration {
	k.t.Helper()
	cmd, stdin, stdout := k.child(fmt.Sprintf("%s=%s:%d", readerEnv, dev, n))
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		k.t.Fatalf("reader of %s said %q, %v", dev, line, err)
	}
	k.write(dir, "cgroup.procs", strconv.Itoa(cmd.Process.Pid))
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		k.t.Fatal(err)
	}
	line, err := out.ReadString('\n')
	ns, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || perr != nil {
		k.t.Fatalf("reader of %s in %s said %q, %v", dev, dir, line, err)
	}
	return time.Duration(ns)
}

// delegateIO enables the io controller from the test's subtree down to dir's parent (the
// kubelet's runc does so on the way to a pod), as the v2 kernel requires for dir's io.max.
func (k *kernel) delegateIO(dir string) {
	k.t.Helper()
	root := k.layout.Mounts.Unified
	if !slices.Contains(strings.Fields(k.read(root, "cgroup.subtree_control")), "io") {
		k.t.Skipf("the cgroup2 root does not delegate io (cgroup.subtree_control is %q); the VM runner's init enables it", k.read(root, "cgroup.subtree_control"))
	}
	var chain []string
	for d := filepath.Dir(dir); d != root; d = filepath.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !slices.Contains(strings.Fields(k.read(chain[i], "cgroup.subtree_control")), "io") {
			k.write(chain[i], "cgroup.subtree_control", "+io")
		}
	}
}

// wantIO checks the kernel's throttle files for disk: read and write bytes per second, "" for
// no rule.
func (k *kernel) wantIO(dir string, disk cgroup.Device, read, write string) {
	k.t.Helper()
	if k.version == cgroup.V1 {
		for file, want := range map[string]string{"blkio.throttle.read_bps_device": read, "blkio.throttle.write_bps_device": write} {
			line := ""
			if want != "" {
				line = disk.String() + " " + want
			}
			if got := lineFor(k.read(dir, file), disk); got != line {
				k.t.Errorf("%s/%s has %q for %s, want %q", dir, file, got, disk, line)
			}
		}
		return
	}
	line := ""
	if read != "" {
		line = disk.String() + " rbps=" + read + " wbps=" + write + " riops=max wiops=max"
	}
	if got := lineFor(k.read(dir, "io.max"), disk); got != line {
		k.t.Errorf("%s/io.max has %q for %s, want %q", dir, got, disk, line)
	}
}

func lineFor(content string, d cgroup.Device) string {
	for _, l := range strings.Split(content, "\n") {
		if strings.HasPrefix(l, d.String()+" ") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
