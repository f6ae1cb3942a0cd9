package cgroup

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDetectMounts(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Mounts
	}{
		{"v1-hybrid-debian12.txt", Mounts{Version: V1, V1: map[Controller]string{
			CPUSet: "/sys/fs/cgroup/cpuset", CPU: "/sys/fs/cgroup/cpu", Memory: "/sys/fs/cgroup/memory", BlockIO: "/sys/fs/cgroup/blkio"}}},
		{"v1-cpuacct-combined-centos7.txt", Mounts{Version: V1, V1: map[Controller]string{
			CPUSet: "/sys/fs/cgroup/cpuset", CPU: "/sys/fs/cgroup/cpu,cpuacct", Memory: "/sys/fs/cgroup/memory"}}},
		{"v1-daemonset-host-mount.txt", Mounts{Version: V1, V1: map[Controller]string{
			CPUSet: "/host/sys/fs/cgroup/cpuset", CPU: "/host/sys/fs/cgroup/cpu,cpuacct", Memory: "/host/sys/fs/cgroup/memory"}}},
		{"v2-systemd-ubuntu2204.txt", Mounts{Version: V2, Unified: "/sys/fs/cgroup"}},
	} {
		got, err := DetectMounts(filepath.Join("testdata", "mountinfo", tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.file, diff)
		}
	}
}

func TestDetectMountsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, content, wantErr string
	}{
		{"container view", "", "only mounted with root"},
		{"mixed versions", "31 26 0:27 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n" +
			"32 26 0:28 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "are on cgroup v1 but cpu,memory are not"},
		{"no cgroups", "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n", "no cgroup v1"},
		{"too few fields", "27 1 254:0 / /\n", "malformed mountinfo entry: parsing '27 1 254:0 / /' failed: not enough fields"},
		{"no separator", "27 1 254:0 / / rw a b c\n", "malformed mountinfo entry"},
		{"relative mount point", "27 1 0:1 / sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "must be absolute"},
		{"bad escape", "27 1 0:1 / /sys/fs\\04 rw - cgroup2 cgroup2 rw\n", "malformed mountinfo entry: parsing '/sys/fs\\04' failed: mount point: bad escape sequence"},
		{"bad octal", "27 1 0:1 / /sys/fs\\999 rw - cgroup2 cgroup2 rw\n", "malformed mountinfo entry: parsing '/sys/fs\\999' failed: mount point: bad escape sequence"},
	} {
		var err error
		if tc.name == "container view" {
			_, err = DetectMounts(filepath.Join("testdata", "mountinfo", "v1-container-view.txt"))
		} else {
			_, err = ParseMountinfo(strings.NewReader(tc.content))
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
	if _, err := DetectMounts(filepath.Join("testdata", "mountinfo", "absent.txt")); err == nil || !strings.Contains(err.Error(), "absent.txt") {
		t.Errorf("missing file: error = %v, want one naming the file", err)
	}
}

func TestMountinfoEscapes(t *testing.T) {
	got, err := ParseMountinfo(strings.NewReader(
		"32 22 0:27 / /host\\040root/sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Unified != "/host root/sys/fs/cgroup" {
		t.Errorf("unified mount = %q, want the space decoded", got.Unified)
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, name := range []string{"v1-hybrid-debian12.txt", "v1-cpuacct-combined-centos7.txt", "v1-container-view.txt", "v2-systemd-ubuntu2204.txt"} {
		f.Add(readTestdata(f, filepath.Join("mountinfo", name)))
	}
	f.Add("1 2 3 / /a\\0 x - cgroup2 c rw\n")
	f.Fuzz(func(t *testing.T, data string) {
		m, err := ParseMountinfo(strings.NewReader(data))
		if err != nil {
			return
		}
		for _, c := range controllers {
			root := m.Root(c)
			if !filepath.IsAbs(root) || filepath.Clean(root) != root {
				t.Fatalf("accepted %s mount point %q", c, root)
			}
		}
		if _, err := NewLayout(m, Cgroupfs, ""); err != nil {
			t.Fatalf("accepted mounts %+v that NewLayout refuses: %v", m, err)
		}
	})
}
