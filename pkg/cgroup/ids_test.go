package cgroup

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

func TestNewContainerRef(t *testing.T) {
	ref, err := NewContainerRef(uidA, "Burstable", "cri-o://"+hexID)
	if err != nil {
		t.Fatal(err)
	}
	want := ContainerRef{Pod: PodRef{UID: uidA, QOS: Burstable}, Container: ContainerID{Runtime: RuntimeCRIO, ID: hexID}}
	if ref != want {
		t.Errorf("ref = %+v, want %+v", ref, want)
	}
	if got := ref.Container.String(); got != "cri-o://"+hexID {
		t.Errorf("container ID prints %q", got)
	}
	if _, err := NewContainerRef("9f86d081884c7d659a2feaa0c55ad015", "Guaranteed", "containerd://"+hexID); err != nil {
		t.Errorf("static pod hash UID refused: %v", err)
	}
}

// craftedIDs are values a hostile or broken API object could carry, each aimed at making a path
// leave the kubepods tree or alias another cgroup.
var craftedIDs = []struct{ uid, qos, id string }{
	{"../../../../etc", "Burstable", "containerd://" + hexID},
	{uidA + "/../" + uidB, "Burstable", "containerd://" + hexID},
	{uidA, "Burstable", "containerd://../../../../tmp/x"},
	{uidA, "Burstable", "containerd://" + hexID + "/../" + hexID2},
	{uidA, "Burstable", "containerd://" + hexID[:62] + ".."},
	{uidA, "Burstable", "containerd://" + strings.ToUpper(hexID)},
	{uidA, "Burstable", "containerd://" + hexID + "\n"},
	{uidA, "Burstable", "containerd://" + hexID + "0"},
	{uidA, "Burstable", "containerd:///" + hexID[1:]},
	{uidA, "Burstable", "docker://" + hexID},
	{uidA, "Burstable", hexID},
	{uidA, "Burstable", "containerd://"},
	{uidA, "Burstable", "cri-o://crio-conmon-" + hexID[:52]},
	{uidA, "../Burstable", "containerd://" + hexID},
	{uidA, "burstable", "containerd://" + hexID},
	{uidA, "Guaranteed/../..", "containerd://" + hexID},
	{uidA, "", "containerd://" + hexID},
	{strings.ToUpper(uidA), "Burstable", "containerd://" + hexID},
	{strings.ReplaceAll(uidA, "-", "_"), "Burstable", "containerd://" + hexID},
	{uidA + "\x00", "Burstable", "containerd://" + hexID},
	{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", "Burstable", "containerd://" + hexID},
	{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0a", "Burstable", "containerd://" + hexID},
	{"0f1e2d3c/4b5a/6978/8796/a5b4c3d2e1f0", "Burstable", "containerd://" + hexID},
	{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg", "Burstable", "containerd://" + hexID},
	{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f٠", "Burstable", "containerd://" + hexID},
	{"", "Burstable", "containerd://" + hexID},
	{"9f86d081884c7d659a2feaa0c55ad01/", "Guaranteed", "containerd://" + hexID},
}

// TestCraftedIDsReachNoPath proves that crafted identifiers are refused before any path is
// built, through the parsers and through literals handed straight to the writer, and that the
// fixture tree (including a victim cgroup outside kubepods) is left byte for byte unchanged.
func TestCraftedIDsReachNoPath(t *testing.T) {
	for _, d := range []Driver{Cgroupfs, Systemd} {
		for _, v := range []Version{V1, V2} {
			fx := newFixture(t, v, d)
			fx.addContainer(mustRef(t, uidA, Burstable, "containerd://"+hexID))
			victim := filepath.Join(fx.root, fx.hierarchies()[0], "victim")
			fx.mkCgroup(victim, fx.hierarchies()[0])
			before := snapshot(t, fx.root)
			want := Resources{CPUs: cpuset.New(7), Mems: cpuset.New(1), CPUShares: 2, MemoryLimit: 1 << 20}
			for _, c := range craftedIDs {
				if _, err := NewContainerRef(c.uid, c.qos, c.id); !errors.Is(err, ErrInvalidID) {
					t.Errorf("NewContainerRef(%q, %q, %q) error = %v, want ErrInvalidID", c.uid, c.qos, c.id, err)
				}
				// The same values as a literal, as a careless caller might build one; an ID
				// without the runtime prefix gets no runtime.
				id, hasPrefix := strings.CutPrefix(c.id, "containerd://")
				rt := RuntimeContainerd
				if !hasPrefix {
					rt = ""
				}
				literal := ContainerRef{Pod: PodRef{UID: PodUID(c.uid), QOS: QOSClass(c.qos)}, Container: ContainerID{Runtime: rt, ID: id}}
				if _, err := fx.fs.Apply(literal, want); !errors.Is(err, ErrInvalidID) {
					t.Errorf("%s %s: Apply(%+v) error = %v, want ErrInvalidID", v, d, literal, err)
				}
				if _, err := fx.fs.Read(literal); !errors.Is(err, ErrInvalidID) {
					t.Errorf("%s %s: Read(%+v) error = %v, want ErrInvalidID", v, d, literal, err)
				}
				if _, err := fx.layout.ContainerDir(CPUSet, literal); !errors.Is(err, ErrInvalidID) {
					t.Errorf("%s %s: ContainerDir(%+v) error = %v, want ErrInvalidID", v, d, literal, err)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, fx.root)); diff != "" {
				t.Errorf("%s %s: crafted IDs changed the tree (-before +after):\n%s", v, d, diff)
			}
		}
	}
}

// FuzzContainerRef checks that any accepted triple yields, for every driver and hierarchy, a
// clean path strictly below the root that parses back to the same container, and that every
// refusal is an ErrInvalidID.
func FuzzContainerRef(f *testing.F) {
	for _, c := range craftedIDs {
		f.Add(c.uid, c.qos, c.id)
	}
	f.Add(uidA, "Burstable", "containerd://"+hexID)
	f.Add(uidB, "Guaranteed", "cri-o://"+hexID2)
	f.Add("9f86d081884c7d659a2feaa0c55ad015", "BestEffort", "containerd://"+hexID)
	m := Mounts{Version: V1, V1: map[Controller]string{CPUSet: "/r/cpuset", CPU: "/r/cpu,cpuacct", Memory: "/r/memory"}}
	f.Fuzz(func(t *testing.T, uid, qos, id string) {
		ref, err := NewContainerRef(uid, qos, id)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("refusal %v does not wrap ErrInvalidID", err)
			}
			return
		}
		for _, d := range []Driver{Cgroupfs, Systemd} {
			l, err := NewLayout(m, d, "base")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range controllers {
				dir, err := l.ContainerDir(c, ref)
				if err != nil {
					t.Fatal(err)
				}
				prefix := filepath.Join(m.Root(c), "base", d.kubepods()) + "/"
				if filepath.Clean(dir) != dir || !strings.HasPrefix(dir, prefix) || strings.Count(dir[len(prefix):], "/") > 2 {
					t.Fatalf("%s: %q leaves %s or is not clean", d, dir, prefix)
				}
				loc, err := l.ParseDir(dir)
				if err != nil {
					t.Fatalf("%s: ParseDir(%q): %v", d, dir, err)
				}
				if back, _ := loc.ContainerRef(); back != ref {
					t.Fatalf("%s: %q parses back to %+v, want %+v", d, dir, back, ref)
				}
			}
		}
	})
}
