package blockdev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// sysfsFixture lays out a sysfs tree the way the kernel does: the devices under
// devices/.../block/<disk>[/<partition>] with their dev files (and partition for partitions),
// /sys/dev/block/MAJ:MIN and /sys/class/block/<name> as relative links to them.
func sysfsFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	devs := []struct{ path, dev string }{
		{"devices/pci0000:00/0000:00:04.0/virtio1/block/vda", "254:0"},
		{"devices/pci0000:00/0000:00:04.0/virtio1/block/vda/vda1", "254:1"},
		{"devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1", "259:0"},
		{"devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1/nvme0n1p2", "259:2"},
	}
	for _, d := range devs {
		dir := filepath.Join(root, d.path)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "dev"), []byte(d.dev+"\n"), 0o644))
		if base := filepath.Base(d.path); base == "vda1" || base == "nvme0n1p2" {
			must(t, os.WriteFile(filepath.Join(dir, "partition"), []byte("1\n"), 0o644))
		}
		for _, link := range []string{filepath.Join("dev", "block", d.dev), filepath.Join("class", "block", filepath.Base(d.path))} {
			l := filepath.Join(root, link)
			must(t, os.MkdirAll(filepath.Dir(l), 0o755))
			rel, err := filepath.Rel(filepath.Dir(l), dir)
			must(t, err)
			must(t, os.Symlink(rel, l))
		}
	}
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const mountTable = `22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:25 / /sys rw,nosuid shared:7 - sysfs sysfs rw
40 22 259:2 / /var/lib/containerd rw,relatime shared:20 - xfs /dev/nvme0n1p2 rw
41 22 0:45 / /var/lib/kubelet rw,relatime shared:21 - btrfs /dev/nvme0n1 rw
42 22 0:46 / /var/lib/kubelet rw,relatime shared:22 - tmpfs tmpfs rw
50 40 0:60 / /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs rw - overlay overlay rw
51 22 0:61 / /srv/data rw - btrfs /dev/mapper/vg-data rw
`

// TestFind places directories on whole disks: a partition's file system on its disk, a longer
// mount point over a shorter one, the last of equal mount points, an anonymous device through
// its /dev source; and says why a directory has no disk.
func TestFind(t *testing.T) {
	sys := sysfsFixture(t)
	mi := filepath.Join(t.TempDir(), "mountinfo")
	must(t, os.WriteFile(mi, []byte(mountTable), 0o644))

	res, err := Find(mi, sys, []string{"/var/lib/containerd", "/etc/kubernetes", "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs/x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []cgroup.Device{{Major: 254, Minor: 0}, {Major: 259, Minor: 0}}
	if diff := cmp.Diff(want, res.Devices); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if len(res.Backings) != 2 || res.Backings[0].Partition == nil || *res.Backings[0].Partition != (cgroup.Device{Major: 259, Minor: 2}) || res.Backings[0].Mount != "/var/lib/containerd" {
		t.Errorf("backings %+v, want containerd's on partition 259:2 of disk 259:0, /etc on 254:1 of 254:0", res.Backings)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "overlay file system") {
		t.Errorf("skipped %+v, want the overlay mount without a block device", res.Skipped)
	}

	// The tmpfs mounted last over /var/lib/kubelet hides the btrfs below it.
	res, err = Find(mi, sys, []string{"/var/lib/kubelet/pods"})
	if err != nil || len(res.Devices) != 0 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "tmpfs") {
		t.Errorf("shadowed mount: %+v, %v; want the tmpfs skipped", res, err)
	}
	res, err = Find(mi, sys, []string{"/srv/data"})
	if err != nil || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "has no block device") {
		t.Errorf("device-mapper source: %+v, %v; want it skipped", res, err)
	}

	// btrfs reports an anonymous device; its /dev source names the disk.
	mi2 := filepath.Join(t.TempDir(), "mountinfo")
	must(t, os.WriteFile(mi2, []byte("41 22 0:45 / /var/lib/kubelet rw - btrfs /dev/nvme0n1p2 rw\n"), 0o644))
	res, err = Find(mi2, sys, []string{"/var/lib/kubelet"})
	if err != nil || len(res.Devices) != 1 || res.Devices[0] != (cgroup.Device{Major: 259, Minor: 0}) {
		t.Errorf("btrfs: %+v, %v; want disk 259:0", res, err)
	}

	if _, err := Find(mi, sys, []string{"var/lib"}); err == nil {
		t.Error("a relative path was accepted")
	}
	if _, err := Find(filepath.Join(t.TempDir(), "absent"), sys, []string{"/"}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing mount table: %v", err)
	}
}

// TestFindOnThisHost places / on a whole disk of this machine and checks it in /sys.
func TestFindOnThisHost(t *testing.T) {
	res, err := Find("/proc/self/mountinfo", "/sys", []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Devices) == 0 {
		t.Skipf("/ has no block device on this machine: %+v", res.Skipped)
	}
	d := res.Devices[0]
	if _, err := os.Stat(filepath.Join("/sys/dev/block", d.String(), "partition")); err == nil {
		t.Errorf("device %s of / is a partition, want its whole disk", d)
	}
	raw, err := os.ReadFile(filepath.Join("/sys/dev/block", d.String(), "dev"))
	if err != nil || strings.TrimSpace(string(raw)) != d.String() {
		t.Errorf("/sys/dev/block/%s/dev reads %q, %v", d, raw, err)
	}
}
