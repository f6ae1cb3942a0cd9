package kerneltest

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/blockdev"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// TestIOLimits writes a pod's I/O bandwidth limit on the whole disk that holds / (found the way
// the agent finds its devices) and reads the kernel's own files back: cgroup v1's
// blkio.throttle.{read,write}_bps_device of each container (v1 throttling is flat), cgroup v2's
// io.max of the pod. A second apply writes nothing, a limit rewritten behind the writer's back
// is repaired with one write, clearing removes the kernel's rule, and a device the kernel cannot
// throttle is refused with an error saying so.
func TestIOLimits(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) { testIOLimits(t, v) })
	}
}

func testIOLimits(t *testing.T, v cgroup.Version) {
	k := newKernel(t, v, cgroup.Cgroupfs)
	found, err := blockdev.Find("/proc/self/mountinfo", "/sys", []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Devices) == 0 {
		t.Skipf("no block device to throttle on this machine (%+v): a qemu guest without a disk, or / on a file system without one", found.Skipped)
	}
	disk := found.Devices[0]
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

	absent := cgroup.Device{Major: disk.Major, Minor: 1<<20 - 1}
	_, err = k.fs.ApplyIO(pod, []cgroup.ContainerID{r.Container}, []cgroup.Device{absent}, lim)
	if err == nil || !strings.Contains(err.Error(), "whole disks") {
		t.Errorf("device %s that does not exist: %v, want the kernel's refusal explained", absent, err)
	}
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
