package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

func changes(res Result) []string {
	var out []string
	for _, w := range res.Changes {
		out = append(out, w.String())
	}
	return out
}

var pinAll = Resources{
	CPUs: cpuset.New(2, 3), Mems: cpuset.New(1),
	CPUQuota: Quota{QuotaUS: 50000, PeriodUS: 100000}, CPUShares: 512, MemoryLimit: 1<<30 + 100,
}

func TestApplyV1(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	other := mustRef(t, uidA, Burstable, "containerd://"+hexID2)
	fx.addContainer(ref)
	fx.addContainer(other)
	before := snapshot(t, fx.root)
	res, err := fx.fs.Apply(ref, pinAll)
	if err != nil {
		t.Fatal(err)
	}
	cs, cpu, mem := fx.dir(CPUSet, ref), fx.dir(CPU, ref), fx.dir(Memory, ref)
	want := []string{
		cs + "/cpuset.cpus: 0-7 -> 2-3",
		cs + "/cpuset.mems: 0-1 -> 1",
		cpu + "/cpu.cfs_quota_us: -1 -> 50000",
		cpu + "/cpu.shares: 1024 -> 512",
		mem + "/memory.limit_in_bytes: -1 -> 1073741824",
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	for dir, files := range map[string]map[string]string{
		cs: {"cpuset.cpus": "2-3", "cpuset.mems": "1"}, cpu: {"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000", "cpu.shares": "512"},
		mem: {"memory.limit_in_bytes": "1073741824"},
	} {
		for f, v := range files {
			if got := fx.read(dir, f); got != v {
				t.Errorf("%s/%s = %q, want %q", dir, f, got, v)
			}
		}
	}
	// Only the container's own files changed: not its pod, not its sibling.
	after := snapshot(t, fx.root)
	for p := range after {
		if after[p] != before[p] && !strings.HasPrefix(p, cs+"/") && !strings.HasPrefix(p, cpu+"/") && !strings.HasPrefix(p, mem+"/") {
			t.Errorf("%s changed from %q to %q", p, before[p], after[p])
		}
	}
	// Write only on change.
	res, err = fx.fs.Apply(ref, pinAll)
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("second Apply = %v, %v; want no changes", changes(res), err)
	}
	// The fixture's effective files are what the "kernel" says; Apply reports them.
	fx.set(cs, "cpuset.effective_cpus", "2-3")
	fx.set(cs, "cpuset.effective_mems", "1")
	res, err = fx.fs.Apply(ref, Resources{CPUs: cpuset.New(2, 3)})
	if err != nil || !res.EffectiveCPUs.Equals(cpuset.New(2, 3)) || !res.EffectiveMems.Equals(cpuset.New(1)) {
		t.Errorf("Apply effective = %s/%s, %v; want 2-3/1", res.EffectiveCPUs, res.EffectiveMems, err)
	}
}

func TestApplyV1WidensAncestorsAndNarrowsSubCgroups(t *testing.T) {
	fx := newFixture(t, V1, Systemd)
	ref := mustRef(t, uidB, Guaranteed, "cri-o://"+hexID)
	fx.addContainer(ref)
	ctr, pod := fx.dir(CPUSet, ref), fx.podDir(CPUSet, ref)
	fx.set(pod, "cpuset.cpus", "0-1")
	fx.set(ctr, "cpuset.cpus", "0-1")
	fx.mkCgroup(filepath.Join(ctr, "sub"), "cpuset")
	res, err := fx.fs.Apply(ref, Resources{CPUs: cpuset.New(4, 5)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		pod + "/cpuset.cpus: 0-1 -> 0-1,4-5",
		ctr + "/cpuset.cpus: 0-1 -> 0-1,4-5",
		ctr + "/sub/cpuset.cpus: 0-1 -> 4-5",
		ctr + "/cpuset.cpus: 0-1,4-5 -> 4-5",
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// TestApplyV1ExclusiveMigratesMemory: an exclusive pin on v1 sets cpuset.memory_migrate on the
// container and its sub-cgroups after the cpus and before any mems write (the kernel moves pages
// only when the flag is set as mems change), and writes the flag again only when it was reset.
func TestApplyV1ExclusiveMigratesMemory(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	ctr := fx.dir(CPUSet, ref)
	fx.mkCgroup(filepath.Join(ctr, "sub"), "cpuset")
	res, err := fx.fs.Apply(ref, Exclusive(cpuset.New(4, 5), cpuset.New(1)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		ctr + "/sub/cpuset.cpus: 0-7 -> 4-5",
		ctr + "/cpuset.cpus: 0-7 -> 4-5",
		ctr + "/cpuset.memory_migrate: 0 -> 1",
		ctr + "/sub/cpuset.memory_migrate: 0 -> 1",
		ctr + "/sub/cpuset.mems: 0-1 -> 1",
		ctr + "/cpuset.mems: 0-1 -> 1",
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if got := fx.read(fx.podDir(CPUSet, ref), "cpuset.memory_migrate"); got != "0" {
		t.Errorf("pod's cpuset.memory_migrate = %s, want it left alone (0)", got)
	}
	res, err = fx.fs.Apply(ref, Exclusive(cpuset.New(4, 5), cpuset.New(1)))
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("second Apply = %v, %v; want no changes", changes(res), err)
	}
	fx.set(ctr, "cpuset.memory_migrate", "0")
	res, err = fx.fs.Apply(ref, Exclusive(cpuset.New(4, 5), cpuset.New(1)))
	if diff := cmp.Diff([]string{ctr + "/cpuset.memory_migrate: 0 -> 1"}, changes(res)); err != nil || diff != "" {
		t.Errorf("Apply after the flag was reset: %v (-want +got):\n%s", err, diff)
	}
	// Moving the pin to the other node: the flag is already set, only the sets change.
	res, err = fx.fs.Apply(ref, Exclusive(cpuset.New(0, 1), cpuset.New(0)))
	for _, w := range res.Changes {
		if w.File == "cpuset.memory_migrate" {
			t.Errorf("re-pin wrote %s, want the flag left as it is", w)
		}
	}
	if err != nil || fx.read(ctr, "cpuset.mems") != "0" {
		t.Errorf("re-pin = %v, %v; want mems 0", changes(res), err)
	}
	// A shared container's values never touch the flag.
	other := mustRef(t, uidB, Burstable, "containerd://"+hexID2)
	fx.addContainer(other)
	res, err = fx.fs.Apply(other, Resources{CPUs: cpuset.New(2, 3), Mems: cpuset.New(0, 1)})
	if err != nil || fx.read(fx.dir(CPUSet, other), "cpuset.memory_migrate") != "0" {
		t.Errorf("shared Apply = %v, %v; want cpuset.memory_migrate left at 0", changes(res), err)
	}
}

// TestApplyV2ExclusiveWritesNoFlag: cgroup v2 migrates pages on every mems change by itself.
func TestApplyV2ExclusiveWritesNoFlag(t *testing.T) {
	fx := newFixture(t, V2, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	res, err := fx.fs.Apply(ref, Exclusive(cpuset.New(4, 5), cpuset.New(1)))
	d := fx.dir(CPUSet, ref)
	if diff := cmp.Diff([]string{d + "/cpuset.cpus:  -> 4-5", d + "/cpuset.mems:  -> 1"}, changes(res)); err != nil || diff != "" {
		t.Errorf("Apply: %v (-want +got):\n%s", err, diff)
	}
}

func TestApplyV2(t *testing.T) {
	fx := newFixture(t, V2, Systemd)
	ref := mustRef(t, uidA, BestEffort, "cri-o://"+hexID)
	fx.addContainer(ref)
	res, err := fx.fs.Apply(ref, pinAll)
	if err != nil {
		t.Fatal(err)
	}
	d := fx.dir(CPUSet, ref)
	want := []string{
		d + "/cpuset.cpus:  -> 2-3",
		d + "/cpuset.mems:  -> 1",
		d + "/cpu.max: max 100000 -> 50000 100000",
		d + "/cpu.weight: 100 -> 59",
		d + "/memory.max: max -> 1073741824",
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if !res.EffectiveCPUs.Equals(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)) {
		t.Errorf("effective CPUs %s, want the fixture's 0-7", res.EffectiveCPUs)
	}
	res, err = fx.fs.Apply(ref, pinAll)
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("second Apply = %v, %v; want no changes", changes(res), err)
	}
	// An ancestor narrowed the container (the kernel shows it in cpuset.cpus.effective).
	fx.set(d, "cpuset.cpus.effective", "2")
	res, err = fx.fs.Apply(ref, Resources{CPUs: cpuset.New(2, 3)})
	if err != nil || !res.EffectiveCPUs.Equals(cpuset.New(2)) {
		t.Errorf("Apply effective = %s, %v; want 2", res.EffectiveCPUs, err)
	}
}

func TestApplyV2Partitions(t *testing.T) {
	fx := newFixture(t, V2, Cgroupfs)
	ref := mustRef(t, uidA, Guaranteed, "containerd://"+hexID)
	fx.addContainer(ref)
	d, pod := fx.dir(CPUSet, ref), fx.podDir(CPUSet, ref)
	fx.set(pod, "cpuset.cpus.partition", "isolated")
	if _, err := fx.fs.Apply(ref, Resources{CPUs: cpuset.New(6)}); err != nil {
		t.Errorf("Apply below a partition: %v", err)
	}
	st, err := fx.fs.Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Partition{{Dir: pod, Mode: "isolated"}}, st.Partitions); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	fx.set(d, "cpuset.cpus.partition", "root")
	before := snapshot(t, fx.root)
	_, err = fx.fs.Apply(ref, Resources{CPUs: cpuset.New(7), CPUShares: 2})
	if !errors.Is(err, ErrPartition) {
		t.Errorf("Apply to a partition root: error %v, want ErrPartition", err)
	}
	if diff := cmp.Diff(before, snapshot(t, fx.root)); diff != "" {
		t.Errorf("Apply to a partition root changed files (-before +after):\n%s", diff)
	}
}

func TestApplyVanished(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		fx := newFixture(t, v, Cgroupfs)
		ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
		fx.addContainer(ref)
		// Decided, then the container exits before the write.
		plan, err := fx.fs.Plan(ref, pinAll)
		if err != nil {
			t.Fatal(err)
		}
		fx.removeContainer(ref)
		res, err := fx.fs.Execute(plan)
		if !errors.Is(err, ErrVanished) || len(res.Changes) != 0 {
			t.Errorf("%s: Execute after exit = %v, %v; want ErrVanished and no changes", v, changes(res), err)
		}
		if _, err := fx.fs.Apply(ref, pinAll); !errors.Is(err, ErrVanished) {
			t.Errorf("%s: Apply after exit: %v, want ErrVanished", v, err)
		}
		if _, err := fx.fs.Read(ref); !errors.Is(err, ErrVanished) {
			t.Errorf("%s: Read after exit: %v, want ErrVanished", v, err)
		}
		for _, c := range controllers {
			if _, err := os.Stat(fx.dir(c, ref)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s cgroup re-created: %v", v, c, err)
			}
		}
		// The whole pod gone: still a vanish.
		if err := os.RemoveAll(fx.podDir(CPUSet, ref)); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.fs.Apply(ref, pinAll); !errors.Is(err, ErrVanished) {
			t.Errorf("%s: Apply after pod removal: %v, want ErrVanished", v, err)
		}
		// No kubepods at all: a configuration problem, not a vanish.
		for _, c := range controllers {
			if err := os.RemoveAll(fx.layout.KubepodsDir(c)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := fx.fs.Apply(ref, pinAll); !errors.Is(err, ErrKubepodsMissing) || errors.Is(err, ErrVanished) {
			t.Errorf("%s: Apply without kubepods: %v, want ErrKubepodsMissing", v, err)
		}
		if _, err := fx.fs.Enumerate(); !errors.Is(err, ErrKubepodsMissing) {
			t.Errorf("%s: Enumerate without kubepods: %v, want ErrKubepodsMissing", v, err)
		}
	}
}

func TestApplyControllerMissing(t *testing.T) {
	fx := newFixture(t, V2, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	fx.addContainer(ref)
	for _, f := range []string{"cpuset.cpus", "cpuset.cpus.partition"} {
		if err := os.Remove(filepath.Join(fx.dir(CPUSet, ref), f)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := fx.fs.Apply(ref, Resources{CPUs: cpuset.New(1)})
	if !errors.Is(err, ErrControllerMissing) || errors.Is(err, ErrVanished) || !strings.Contains(err.Error(), "subtree_control") {
		t.Errorf("Apply without the cpuset controller: %v, want ErrControllerMissing naming subtree_control", err)
	}
}

func TestApplyRefusesBadValues(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	fx.addContainer(ref)
	before := snapshot(t, fx.root)
	if _, err := fx.fs.Apply(ref, Resources{CPUShares: 1}); err == nil || !strings.Contains(err.Error(), ref.String()) {
		t.Errorf("Apply(shares 1) = %v, want an error naming the container", err)
	}
	fx.set(fx.dir(CPU, ref), "cpu.shares", "garbage")
	before[filepath.Join(fx.dir(CPU, ref), "cpu.shares")] = "garbage\n"
	if _, err := fx.fs.Apply(ref, Resources{CPUShares: 2}); err == nil || !strings.Contains(err.Error(), "cpu.shares") {
		t.Errorf("Apply over unreadable cpu.shares = %v, want an error naming the file", err)
	}
	if diff := cmp.Diff(before, snapshot(t, fx.root)); diff != "" {
		t.Errorf("refused Apply changed files (-before +after):\n%s", diff)
	}
}

func TestRead(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		fx := newFixture(t, v, Systemd)
		ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
		fx.addContainer(ref)
		if _, err := fx.fs.Apply(ref, pinAll); err != nil {
			t.Fatal(err)
		}
		got, err := fx.fs.Read(ref)
		if err != nil {
			t.Fatal(err)
		}
		want := State{
			Container: ref, Version: v, CPUs: cpuset.New(2, 3), Mems: cpuset.New(1),
			EffectiveCPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), EffectiveMems: cpuset.New(0, 1),
			CPUQuota: pinAll.CPUQuota, MemoryLimit: 1 << 30,
		}
		if v == V1 {
			want.CPUShares = 512
		} else {
			want.CPUWeight = 59
		}
		if diff := cmp.Diff(want, got, cpusetEqual); diff != "" {
			t.Errorf("%s state (-want +got):\n%s", v, diff)
		}
	}
}

func TestEnumerate(t *testing.T) {
	for _, d := range []Driver{Cgroupfs, Systemd} {
		fx := newFixture(t, V1, d)
		refs := []ContainerRef{
			mustRef(t, uidB, Guaranteed, "containerd://"+hexID),
			mustRef(t, uidA, Burstable, "cri-o://"+hexID2),
			mustRef(t, uidA, Burstable, "containerd://"+hexID),
			mustRef(t, uidB, BestEffort, "containerd://"+hexID2),
		}
		for _, r := range refs {
			fx.addContainer(r)
		}
		if _, err := fx.fs.Apply(refs[0], Resources{CPUs: cpuset.New(6, 7), Mems: cpuset.New(1)}); err != nil {
			t.Fatal(err)
		}
		// Cgroups that are not containers of this driver.
		kp := fx.layout.KubepodsDir(CPUSet)
		podA := fx.podDir(CPUSet, refs[1])
		for _, junk := range []string{
			filepath.Join(podA, "crio-conmon-"+hexID), filepath.Join(podA, "crio-conmon-"+hexID+".scope"),
			filepath.Join(kp, "system.slice"), filepath.Join(kp, "podnot-a-uid"), filepath.Join(fx.dir(CPUSet, refs[2]), "nested"),
		} {
			fx.mkCgroup(junk, "cpuset")
		}
		got, err := fx.fs.Enumerate()
		if err != nil {
			t.Fatal(err)
		}
		all, two := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), cpuset.New(0, 1)
		byRef := map[ContainerRef]Container{}
		for _, c := range got {
			byRef[c.Ref] = c
		}
		for i, r := range refs {
			want := Container{Ref: r, Dir: fx.dir(CPUSet, r), CPUs: all, Mems: two, EffectiveCPUs: all, EffectiveMems: two}
			if i == 0 {
				want.CPUs, want.Mems = cpuset.New(6, 7), cpuset.New(1)
			}
			if diff := cmp.Diff(want, byRef[r], cpusetEqual); diff != "" {
				t.Errorf("%s: container %s (-want +got):\n%s", d, r, diff)
			}
		}
		if len(got) != len(refs) {
			t.Errorf("%s: enumerated %d containers, want %d: %+v", d, len(got), len(refs), got)
		}
		for i := 1; i < len(got); i++ {
			if got[i-1].Dir >= got[i].Dir {
				t.Errorf("%s: not in directory order: %s before %s", d, got[i-1].Dir, got[i].Dir)
			}
		}
	}
}

// TestApplyV1ReadsAncestorsOnlyAsFarAsNeeded relies on the v1 subset rule: once an ancestor
// holds the target, nothing above it is read (here kubepods holds garbage to prove it).
func TestApplyV1ReadsAncestorsOnlyAsFarAsNeeded(t *testing.T) {
	fx := newFixture(t, V1, Cgroupfs)
	ref := mustRef(t, uidA, Burstable, "containerd://"+hexID)
	fx.addContainer(ref)
	pod := fx.podDir(CPUSet, ref)
	fx.set(pod, "cpuset.cpus", "0-3")
	fx.set(filepath.Dir(pod), "cpuset.cpus", "0-3")
	fx.set(fx.layout.KubepodsDir(CPUSet), "cpuset.cpus", "garbage")
	if _, err := fx.fs.Apply(ref, Resources{CPUs: cpuset.New(2, 3)}); err != nil {
		t.Errorf("Apply inside the pod's set read further up: %v", err)
	}
	_, err := fx.fs.Apply(ref, Resources{CPUs: cpuset.New(6)})
	if err == nil || !strings.Contains(err.Error(), fx.layout.KubepodsDir(CPUSet)) {
		t.Errorf("Apply outside the pod's set: %v, want the unreadable kubepods cpuset named", err)
	}
}
