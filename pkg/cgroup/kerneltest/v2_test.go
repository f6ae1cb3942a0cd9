package kerneltest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/google/go-cmp/cmp"
)

// TestV2EffectiveSets narrows a container's pod behind the writer's back: the container's own
// cpuset.cpus keeps its value, and the writer reports (and the threads show) the intersection,
// or the pod's set when the two are disjoint.
func TestV2EffectiveSets(t *testing.T) {
	k := newKernel(t, cgroup.V2, cgroup.Systemd)
	r := ref(t, uidS, "Burstable", idS1)
	k.addContainer(r)
	ctr, err := k.layout.ContainerDir(cgroup.CPUSet, r)
	if err != nil {
		t.Fatal(err)
	}
	pod := filepath.Dir(ctr)
	p := k.start(3, "light", ctr)
	excl, pool, _ := k.pools()
	k.write(pod, "cpuset.cpus", pool.String())

	res := k.apply(r, cgroup.Resources{CPUs: k.online})
	if own := k.read(ctr, "cpuset.cpus"); own != k.online.String() {
		t.Errorf("container's own cpuset.cpus %q, want %s", own, k.online)
	}
	if !res.EffectiveCPUs.Equals(pool) {
		t.Errorf("effective %s under a pod narrowed to %s, want the intersection", res.EffectiveCPUs, pool)
	}
	k.verify(p, pool, k.mems)

	res = k.apply(r, cgroup.Resources{CPUs: excl})
	if !res.EffectiveCPUs.Equals(pool) {
		t.Errorf("effective %s for %s disjoint from the pod's %s, want the pod's", res.EffectiveCPUs, excl, pool)
	}
	k.verify(p, pool, k.mems)

	k.write(pod, "cpuset.cpus", k.online.String())
	st, err := k.fs.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	if !st.EffectiveCPUs.Equals(excl) || !st.CPUs.Equals(excl) {
		t.Errorf("after the pod widened: own %s effective %s, want %s", st.CPUs, st.EffectiveCPUs, excl)
	}
	k.verify(p, excl, k.mems)
}

// TestV2PartitionsLeftAlone makes the container's cgroup and its pod partition roots (invalid
// ones: their parents are not partitions, so no CPU leaves the rest of the system): the writer
// reports them, refuses to rewrite the container's cpuset, and writes nothing.
func TestV2PartitionsLeftAlone(t *testing.T) {
	k := newKernel(t, cgroup.V2, cgroup.Cgroupfs)
	r := ref(t, uidS, "Burstable", idS1)
	k.addContainer(r)
	ctr, err := k.layout.ContainerDir(cgroup.CPUSet, r)
	if err != nil {
		t.Fatal(err)
	}
	pod := filepath.Dir(ctr)
	excl, _, _ := k.pools()
	if _, err := os.Stat(filepath.Join(ctr, "cpuset.cpus.partition")); err != nil {
		t.Skipf("this kernel has no cpuset partitions: %v", err)
	}
	for _, dir := range []string{pod, ctr} {
		if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus.partition"), []byte("root"), 0o644); err != nil {
			t.Skipf("the kernel refuses a partition root below a non-partition (%v); nothing to detect", err)
		}
	}
	st, err := k.fs.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, p := range st.Partitions {
		dirs = append(dirs, p.Dir)
		if !strings.HasPrefix(p.Mode, "root") {
			t.Errorf("partition %s mode %q, want root...", p.Dir, p.Mode)
		}
	}
	if diff := cmp.Diff([]string{pod, ctr}, dirs); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	before := k.read(ctr, "cpuset.cpus")
	res, err := k.fs.Apply(r, cgroup.Resources{CPUs: excl, CPUShares: 2})
	if !errors.Is(err, cgroup.ErrPartition) || len(res.Changes) != 0 {
		t.Errorf("Apply to a partition: %v, %v; want ErrPartition and no changes", changes(res), err)
	}
	if after := k.read(ctr, "cpuset.cpus"); after != before {
		t.Errorf("partition's cpuset.cpus changed from %q to %q", before, after)
	}
}
