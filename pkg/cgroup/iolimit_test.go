package cgroup

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseV1Throttle(t *testing.T) {
	got, err := ParseV1Throttle("8:0 1048576\n254:16 10000000\n253:0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[Device]uint64{{8, 0}: 1048576, {254, 16}: 10000000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, err := ParseV1Throttle(""); err != nil || len(got) != 0 {
		t.Errorf("empty file: %v, %v; want no limits", got, err)
	}
	for _, bad := range []string{"8:0", "8:0 1 2", "8 100", "8:x 100", "8:0 -1", "8:0 1\n8:0 2", "4294967296:0 1"} {
		if _, err := ParseV1Throttle(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := ParseV1Throttle(strings.Repeat("8:0 1\n", maxIOLines+1)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("too many lines: %v", err)
	}
}

func TestParseIOMax(t *testing.T) {
	got, err := ParseIOMax("8:0 rbps=1048576 wbps=max riops=max wiops=max\n254:0 rbps=max wbps=2000 riops=10 wiops=max\n7:0 rbps=max wbps=max riops=5 wiops=max\n")
	if err != nil {
		t.Fatal(err)
	}
	want := IOLimits{{8, 0}: {ReadBPS: 1048576}, {254, 0}: {WriteBPS: 2000}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"8:0", "8:0 rbps", "8:0 rbps=x", "8:0 bps=1", "x:0 rbps=1", "8:0 rbps=1\n8:0 wbps=1"} {
		if _, err := ParseIOMax(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestIOV2LineRoundTrip(t *testing.T) {
	for _, l := range []IOLimit{{}, {ReadBPS: 1}, {WriteBPS: 10_000_000}, {ReadBPS: 5, WriteBPS: MaxIOBPS}} {
		d := Device{Major: 259, Minor: 3}
		got, err := ParseIOMax(ioV2Line(d, l))
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		if got[d] != l {
			t.Errorf("%q reads back %+v, want %+v", ioV2Line(d, l), got[d], l)
		}
	}
	if err := (IOLimit{ReadBPS: MaxIOBPS + 1}).Validate(); err == nil {
		t.Error("a limit above MaxIOBPS validated")
	}
}

func TestIODirs(t *testing.T) {
	pod := PodRef{UID: uidA, QOS: Burstable}
	id := ContainerID{Runtime: RuntimeContainerd, ID: hexID}
	v2, _ := NewLayout(Mounts{Version: V2, Unified: "/sys/fs/cgroup"}, Systemd, "")
	dirs, err := v2.IODirs(pod, []ContainerID{id})
	want := []string{"/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice"}
	if err != nil || !cmp.Equal(dirs, want) {
		t.Errorf("v2: %v, %v; want the pod's cgroup %v", dirs, err, want)
	}
	v1m := Mounts{Version: V1, V1: map[Controller]string{CPUSet: "/c/cpuset", CPU: "/c/cpu", Memory: "/c/memory", BlockIO: "/c/blkio"}}
	v1, _ := NewLayout(v1m, Cgroupfs, "")
	dirs, err = v1.IODirs(pod, []ContainerID{id})
	want = []string{"/c/blkio/kubepods/burstable/pod" + uidA + "/" + hexID}
	if err != nil || !cmp.Equal(dirs, want) {
		t.Errorf("v1: %v, %v; want each container's blkio cgroup %v", dirs, err, want)
	}
	delete(v1m.V1, BlockIO)
	if _, err := v1.IODirs(pod, nil); err == nil || !strings.Contains(err.Error(), "no cgroup v1 blkio hierarchy") {
		t.Errorf("v1 without blkio: %v", err)
	}
}

func FuzzParseV1Throttle(f *testing.F) {
	f.Add("8:0 1048576\n254:16 10000000\n")
	f.Add("8:0 0\n")
	f.Add("1:2 18446744073709551615")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseV1Throttle(s)
		if err != nil {
			return
		}
		for d, n := range m {
			if n == 0 {
				t.Fatalf("device %s kept with no limit", d)
			}
			back, err := ParseV1Throttle(v1Line(d, n))
			if err != nil || back[d] != n {
				t.Fatalf("%s %d does not read back: %v %v", d, n, back, err)
			}
		}
	})
}

func FuzzParseIOMax(f *testing.F) {
	f.Add("8:0 rbps=1048576 wbps=max riops=max wiops=max\n")
	f.Add("254:0 rbps=max wbps=2000 riops=10 wiops=max\n")
	f.Add("1:1 rbps=0")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseIOMax(s)
		if err != nil {
			return
		}
		for d, l := range m {
			if l == (IOLimit{}) {
				t.Fatalf("device %s kept with no limit", d)
			}
			back, err := ParseIOMax(ioV2Line(d, l))
			if err != nil || back[d] != l {
				t.Fatalf("%+v on %s does not read back through %q: %v %v", l, d, ioV2Line(d, l), back, err)
			}
		}
	})
}

func FuzzParseDevice(f *testing.F) {
	f.Add("8:0")
	f.Add("4294967295:4294967295")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDevice(s)
		if err != nil {
			return
		}
		if back, err := ParseDevice(d.String()); err != nil || back != d {
			t.Fatalf("%q → %v does not read back: %v", s, d, err)
		}
	})
}
