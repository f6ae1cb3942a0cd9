package cgroup

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContainerPaths(t *testing.T) {
	uidU := strings.ReplaceAll(uidA, "-", "_")
	static := "9f86d081884c7d659a2feaa0c55ad015"
	for _, tc := range []struct {
		driver      Driver
		uid         string
		qos         QOSClass
		containerID string
		want        string
	}{
		{Cgroupfs, uidA, Burstable, "containerd://" + hexID, "kubepods/burstable/pod" + uidA + "/" + hexID},
		{Cgroupfs, uidA, BestEffort, "containerd://" + hexID, "kubepods/besteffort/pod" + uidA + "/" + hexID},
		{Cgroupfs, uidA, Guaranteed, "containerd://" + hexID, "kubepods/pod" + uidA + "/" + hexID},
		{Cgroupfs, uidA, Burstable, "cri-o://" + hexID, "kubepods/burstable/pod" + uidA + "/crio-" + hexID},
		{Cgroupfs, static, Guaranteed, "containerd://" + hexID, "kubepods/pod" + static + "/" + hexID},
		{Systemd, uidA, Burstable, "containerd://" + hexID,
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + hexID + ".scope"},
		{Systemd, uidA, BestEffort, "cri-o://" + hexID,
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-" + hexID + ".scope"},
		{Systemd, uidA, Guaranteed, "containerd://" + hexID,
			"kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + hexID + ".scope"},
		{Systemd, uidA, Guaranteed, "cri-o://" + hexID, "kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + hexID + ".scope"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			ref := mustRef(t, tc.uid, tc.qos, tc.containerID)
			for _, v := range []Version{V1, V2} {
				m := Mounts{Version: v, Unified: "/sys/fs/cgroup", V1: map[Controller]string{
					CPUSet: "/sys/fs/cgroup/cpuset", CPU: "/sys/fs/cgroup/cpu,cpuacct", Memory: "/sys/fs/cgroup/memory"}}
				l, err := NewLayout(m, tc.driver, "")
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range controllers {
					got, err := l.ContainerDir(c, ref)
					if err != nil {
						t.Fatal(err)
					}
					if want := filepath.Join(m.Root(c), tc.want); got != want {
						t.Errorf("%s %s dir = %s, want %s", v, c, got, want)
					}
					loc, err := l.ParseDir(got)
					if err != nil {
						t.Fatalf("ParseDir(%s): %v", got, err)
					}
					if back, ok := loc.ContainerRef(); !ok || back != ref {
						t.Errorf("ParseDir(%s) = %+v, want %+v", got, loc, ref)
					}
				}
				pod, err := l.PodDir(CPUSet, ref.Pod)
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(m.Root(CPUSet), filepath.Dir(tc.want)); pod != want {
					t.Errorf("pod dir = %s, want %s", pod, want)
				}
			}
		})
	}
}

func TestParseRelPathLevels(t *testing.T) {
	uidU := strings.ReplaceAll(uidA, "-", "_")
	for _, tc := range []struct {
		driver Driver
		rel    string
		want   Location
	}{
		{Cgroupfs, "kubepods", Location{Level: LevelKubepods}},
		{Cgroupfs, "kubepods/burstable", Location{Level: LevelQOS, QOS: Burstable}},
		{Cgroupfs, "kubepods/besteffort", Location{Level: LevelQOS, QOS: BestEffort}},
		{Cgroupfs, "kubepods/pod" + uidA, Location{Level: LevelPod, QOS: Guaranteed, Pod: uidA}},
		{Cgroupfs, "kubepods/besteffort/pod" + uidA + "/crio-" + hexID,
			Location{Level: LevelContainer, QOS: BestEffort, Pod: uidA, Container: ContainerID{RuntimeCRIO, hexID}}},
		{Systemd, "kubepods.slice", Location{Level: LevelKubepods}},
		{Systemd, "kubepods.slice/kubepods-besteffort.slice", Location{Level: LevelQOS, QOS: BestEffort}},
		{Systemd, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice",
			Location{Level: LevelPod, QOS: Burstable, Pod: uidA}},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + hexID + ".scope",
			Location{Level: LevelContainer, QOS: Guaranteed, Pod: uidA, Container: ContainerID{RuntimeContainerd, hexID}}},
	} {
		got, err := ParseRelPath(tc.driver, tc.rel)
		if err != nil {
			t.Errorf("ParseRelPath(%s, %q): %v", tc.driver, tc.rel, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseRelPath(%s, %q) (-want +got):\n%s", tc.driver, tc.rel, diff)
		}
	}
}

func TestParseRelPathRejects(t *testing.T) {
	uidU := strings.ReplaceAll(uidA, "-", "_")
	for _, tc := range []struct {
		driver Driver
		rel    string
	}{
		{Cgroupfs, ""},
		{Cgroupfs, "/kubepods"},
		{Cgroupfs, "kubepods/"},
		{Cgroupfs, "kubepods//burstable"},
		{Cgroupfs, "kubepods/burstable/"},
		{Cgroupfs, "kubepods/../kubepods/burstable"},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/.."},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/crio-conmon-" + hexID},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/" + hexID + "/nested"},
		{Cgroupfs, "kubepods/burstable/pod" + strings.ToUpper(uidA)},
		{Cgroupfs, "kubepods/burstable/pod" + uidU},
		{Cgroupfs, "kubepods/guaranteed/pod" + uidA},
		{Cgroupfs, "kubepods/burstable/besteffort"},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/" + strings.ToUpper(hexID)},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/" + hexID[:63]},
		{Cgroupfs, "kubepods/burstable/pod" + uidA + "/cri-containerd-" + hexID + ".scope"},
		{Cgroupfs, "kubepods.slice"},
		{Cgroupfs, "system.slice/kubepods"},
		{Systemd, "kubepods"},
		{Systemd, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidA + ".slice"},
		{Systemd, "kubepods.slice/kubepods-burstable-pod" + uidU + ".slice"},
		{Systemd, "kubepods.slice/kubepods-besteffort.slice/kubepods-burstable-pod" + uidU + ".slice"},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/crio-conmon-" + hexID + ".scope"},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/" + hexID},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + hexID},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + hexID + ".scope/container"},
		{Systemd, "kubepods.slice/kubepods-pod" + uidU + ".slice/docker-" + hexID + ".scope"},
		{Systemd, "kubepods.slice/kubepods-pod_" + uidU + ".slice"},
		{Driver("docker"), "kubepods"},
	} {
		if loc, err := ParseRelPath(tc.driver, tc.rel); err == nil {
			t.Errorf("ParseRelPath(%s, %q) = %+v, want an error", tc.driver, tc.rel, loc)
		}
	}
}

func TestParseDir(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	for _, dir := range []string{fx.dir(CPUSet, ref), fx.dir(CPU, ref), fx.dir(Memory, ref)} {
		loc, err := fx.layout.ParseDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := loc.ContainerRef(); got != ref {
			t.Errorf("ParseDir(%s) = %+v, want %+v", dir, got, ref)
		}
	}
	for _, dir := range []string{
		fx.dir(CPUSet, ref) + "/",
		fx.dir(CPUSet, ref) + "/../" + hexID,
		"kubepods/burstable",
		filepath.Join(fx.root, "elsewhere", "kubepods"),
		filepath.Join(fx.root, "cpuset"),
		filepath.Join(fx.root, "cpuset2", "kubepods"),
	} {
		if _, err := fx.layout.ParseDir(dir); !errors.Is(err, ErrUnrecognized) {
			t.Errorf("ParseDir(%q) error = %v, want ErrUnrecognized", dir, err)
		}
	}
}

func TestNewLayoutRejects(t *testing.T) {
	m := Mounts{Version: V2, Unified: "/sys/fs/cgroup"}
	for _, base := range []string{"/abs", "..", "a/../..", "a/", "./a"} {
		if _, err := NewLayout(m, Cgroupfs, base); err == nil {
			t.Errorf("NewLayout(base %q) succeeded, want an error", base)
		}
	}
	if _, err := NewLayout(m, "docker", ""); err == nil {
		t.Error("NewLayout(driver docker) succeeded, want an error")
	}
	if _, err := NewLayout(Mounts{Version: V2, Unified: "relative"}, Cgroupfs, ""); err == nil {
		t.Error("NewLayout(relative mount) succeeded, want an error")
	}
	if _, err := NewLayout(Mounts{Version: 3, Unified: "/sys/fs/cgroup"}, Cgroupfs, ""); err == nil {
		t.Error("NewLayout(version 3) succeeded, want an error")
	}
}

// FuzzParseRelPath checks that every accepted path names exactly one kubelet object whose
// path is rebuilt byte for byte, and stays below the root.
func FuzzParseRelPath(f *testing.F) {
	uidU := strings.ReplaceAll(uidA, "-", "_")
	for _, seed := range []string{
		"kubepods", "kubepods/burstable", "kubepods/pod" + uidA + "/" + hexID,
		"kubepods/besteffort/pod" + uidA + "/crio-" + hexID,
		"kubepods/burstable/pod" + uidA + "/../../etc",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + hexID + ".scope",
		"kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + hexID + ".scope",
		"kubepods.slice/kubepods-pod" + uidU + ".slice/crio-conmon-" + hexID + ".scope",
	} {
		f.Add(false, seed)
		f.Add(true, seed)
	}
	f.Fuzz(func(t *testing.T, systemd bool, rel string) {
		d := Cgroupfs
		if systemd {
			d = Systemd
		}
		loc, err := ParseRelPath(d, rel)
		if err != nil {
			if !errors.Is(err, ErrUnrecognized) {
				t.Fatalf("ParseRelPath(%q) error %v does not wrap ErrUnrecognized", rel, err)
			}
			return
		}
		if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
			t.Fatalf("accepted non-local or unclean path %q", rel)
		}
		if loc.relPath(d) != rel {
			t.Fatalf("accepted %q but rebuilds %q", rel, loc.relPath(d))
		}
		if ref, ok := loc.ContainerRef(); ok {
			if err := ref.Validate(); err != nil {
				t.Fatalf("accepted %q with invalid ref: %v", rel, err)
			}
			if d.containerPath(ref) != rel {
				t.Fatalf("accepted %q but the container path is %q", rel, d.containerPath(ref))
			}
		}
	})
}
