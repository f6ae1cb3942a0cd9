package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"
)

const (
	uidW = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	uidS = "11111111-2222-3333-4444-555555555555"
	uidT = "9f86d081-884c-7d65-9a2f-eaa0c55ad015"
	idW  = "containerd://7c4f7e5a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e"
	idS1 = "containerd://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idS2 = "cri-o://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idS3 = "containerd://cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func ref(t *testing.T, uid, qos, id string) cgroup.ContainerRef {
	t.Helper()
	r, err := cgroup.NewContainerRef(uid, qos, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func changes(res cgroup.Result) []string {
	var out []string
	for _, w := range res.Changes {
		out = append(out, w.String())
	}
	return out
}

// pools splits the host for a pinning test: on a multi-NUMA host the exclusive CPUs are up to
// two CPUs of the highest NUMA node that has CPUs and their memory is that node; on a single
// node the last online CPU. The shared pool is every other CPU, on every node.
func (k *kernel) pools() (exclusive, shared, exclusiveMems cpuset.CPUSet) {
	k.t.Helper()
	list := k.online.List()
	exclusive, exclusiveMems = cpuset.New(list[len(list)-1]), k.mems
	nodes := k.mems.List()
	for i := len(nodes) - 1; i >= 0 && len(nodes) > 1; i-- {
		cpus := k.readSet(fmt.Sprintf("/sys/devices/system/node/node%d", nodes[i]), "cpulist").Intersection(k.online)
		if cpus.IsEmpty() {
			continue
		}
		exclusive, exclusiveMems = cpuset.New(cpus.List()[:min(2, cpus.Size())]...), cpuset.New(nodes[i])
		break
	}
	return exclusive, k.online.Difference(exclusive), exclusiveMems
}

func (k *kernel) apply(r cgroup.ContainerRef, want cgroup.Resources) cgroup.Result {
	k.t.Helper()
	res, err := k.fs.Apply(r, want)
	if err != nil {
		k.t.Fatalf("Apply(%s): %v", r, err)
	}
	return res
}

// TestPinAndSharedPool pins a worker to the exclusive CPU and keeps two shared containers on
// the rest, then shrinks and grows the shared pool under their running threads.
func TestPinAndSharedPool(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			k := newKernel(t, v, cgroup.Cgroupfs)
			worker := ref(t, uidW, "Guaranteed", idW)
			shared := []cgroup.ContainerRef{ref(t, uidS, "Burstable", idS1), ref(t, uidT, "BestEffort", idS2)}
			procs := map[cgroup.ContainerRef]*proc{}
			for _, r := range append([]cgroup.ContainerRef{worker}, shared...) {
				k.addContainer(r)
				procs[r] = k.start(4, "light", k.dirs(r)...)
			}
			excl, pool, exclMems := k.pools()
			mems := k.mems
			res := k.apply(worker, cgroup.Resources{CPUs: excl, Mems: exclMems})
			if !res.EffectiveCPUs.Equals(excl) || !res.EffectiveMems.Equals(exclMems) {
				t.Errorf("worker effective %s/%s, want %s/%s", res.EffectiveCPUs, res.EffectiveMems, excl, exclMems)
			}
			if len(res.Changes) == 0 || res.Changes[0].File != "cpuset.cpus" || res.Changes[0].New != excl.String() {
				t.Errorf("worker changes %v, want cpuset.cpus -> %s first", changes(res), excl)
			}
			for _, r := range shared {
				k.apply(r, cgroup.Resources{CPUs: pool, Mems: mems})
			}
			k.verify(procs[worker], excl, exclMems)
			for _, r := range shared {
				k.verify(procs[r], pool, mems)
			}
			if res := k.apply(worker, cgroup.Resources{CPUs: excl, Mems: exclMems}); len(res.Changes) != 0 {
				t.Errorf("re-applying the pin wrote %v, want nothing", changes(res))
			}
			// The worker leaves: the shared pool grows to every CPU, then shrinks again.
			for cycle := 0; cycle < 3; cycle++ {
				for _, want := range []cpuset.CPUSet{k.online, pool} {
					for _, r := range shared {
						res := k.apply(r, cgroup.Resources{CPUs: want, Mems: mems})
						if !res.EffectiveCPUs.Equals(want) {
							t.Errorf("%s effective %s, want %s", r, res.EffectiveCPUs, want)
						}
					}
					for _, r := range shared {
						k.verify(procs[r], want, mems)
					}
				}
			}
			k.verify(procs[worker], excl, exclMems)
		})
	}
}

// TestV1OrderingRules shows the kernel's v1 subset rules refusing the naive writes, and the
// writer getting through them: it widens a narrowed pod top-down and narrows a container's own
// sub-cgroup before the container.
func TestV1OrderingRules(t *testing.T) {
	k := newKernel(t, cgroup.V1, cgroup.Systemd)
	r := ref(t, uidS, "Burstable", idS1)
	k.addContainer(r)
	ctr, err := k.layout.ContainerDir(cgroup.CPUSet, r)
	if err != nil {
		t.Fatal(err)
	}
	pod := filepath.Dir(ctr)
	excl, pool, _ := k.pools()
	k.write(ctr, "cpuset.cpus", pool.String())
	k.write(pod, "cpuset.cpus", pool.String())
	p := k.start(3, "light", k.dirs(r)...)

	// A child may not leave its parent's set (EACCES)...
	if err := cgroups.WriteFile(ctr, "cpuset.cpus", excl.String()); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("naive write outside the pod's cpuset: %v, want EACCES", err)
	}
	res := k.apply(r, cgroup.Resources{CPUs: excl})
	want := []string{
		pod + "/cpuset.cpus: " + pool.String() + " -> " + k.online.String(),
		ctr + "/cpuset.cpus: " + pool.String() + " -> " + excl.String(),
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	k.verify(p, excl, k.mems)

	// ...and a parent may not shrink below a child (EBUSY).
	k.apply(r, cgroup.Resources{CPUs: k.online})
	sub := filepath.Join(ctr, "sub")
	k.mkdirAll(sub)
	inner := k.start(3, "light", sub)
	if err := cgroups.WriteFile(ctr, "cpuset.cpus", pool.String()); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("naive narrowing above a sub-cgroup: %v, want EBUSY", err)
	}
	res = k.apply(r, cgroup.Resources{CPUs: pool})
	want = []string{
		sub + "/cpuset.cpus: " + k.online.String() + " -> " + pool.String(),
		ctr + "/cpuset.cpus: " + k.online.String() + " -> " + pool.String(),
	}
	if diff := cmp.Diff(want, changes(res)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	k.verify(inner, pool, k.mems)
	k.verify(p, pool, k.mems)
}

// TestKillAndVanish kills a shared container's process in the middle of a pool change, and
// makes containers vanish between the decision and the write: the writer reports ErrVanished,
// creates nothing, and the other containers are unaffected.
func TestKillAndVanish(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			k := newKernel(t, v, cgroup.Systemd)
			rs := []cgroup.ContainerRef{ref(t, uidS, "Burstable", idS1), ref(t, uidS, "Burstable", idS2), ref(t, uidT, "BestEffort", idS3)}
			var ps []*proc
			for _, r := range rs {
				k.addContainer(r)
				ps = append(ps, k.start(3, "light", k.dirs(r)...))
			}
			_, pool, _ := k.pools()
			k.apply(rs[0], cgroup.Resources{CPUs: pool, Mems: k.mems})
			k.kill9(ps[1])
			// The container's process is dead but its cgroup is still there: the write lands.
			if res := k.apply(rs[1], cgroup.Resources{CPUs: pool, Mems: k.mems}); !res.EffectiveCPUs.Equals(pool) {
				t.Errorf("empty cgroup effective %s, want %s", res.EffectiveCPUs, pool)
			}
			k.apply(rs[2], cgroup.Resources{CPUs: pool, Mems: k.mems})
			k.verify(ps[0], pool, k.mems)
			k.verify(ps[2], pool, k.mems)

			// The runtime removes the dead container's cgroup.
			k.removeContainer(rs[1])
			_, err := k.fs.Apply(rs[1], cgroup.Resources{CPUs: k.online, CPUShares: 2, MemoryLimit: 64 << 20})
			if !errors.Is(err, cgroup.ErrVanished) {
				t.Errorf("Apply to a removed container: %v, want ErrVanished", err)
			}
			// Decided, then the container exits and its cgroup goes before the write.
			plan, err := k.fs.Plan(rs[2], cgroup.Resources{CPUs: k.online, Mems: k.mems, CPUShares: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Writes()) == 0 {
				t.Fatal("plan has no writes; the test needs one")
			}
			k.kill9(ps[2])
			k.removeContainer(rs[2])
			res, err := k.fs.Execute(plan)
			if !errors.Is(err, cgroup.ErrVanished) || len(res.Changes) != 0 {
				t.Errorf("Execute after the container went: %v, %v; want ErrVanished and no changes", changes(res), err)
			}
			for _, r := range rs[1:] {
				for _, dir := range k.dirs(r) {
					if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s re-created (stat: %v)", dir, err)
					}
				}
			}
			k.verify(ps[0], pool, k.mems)
		})
	}
}

// TestBandwidthAndMemory applies quota, shares/weight and a memory limit, reads them back, and
// checks that the quota really throttles a spinning thread.
func TestBandwidthAndMemory(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			k := newKernel(t, v, cgroup.Cgroupfs)
			r := ref(t, uidS, "Burstable", idS1)
			k.addContainer(r)
			k.start(1, "busy", k.dirs(r)...)
			page := int64(os.Getpagesize())
			want := cgroup.Resources{CPUQuota: cgroup.Quota{QuotaUS: 10000, PeriodUS: 100000}, CPUShares: 256, MemoryLimit: 256<<20 + 1}
			res := k.apply(r, want)
			if len(res.Changes) != 3 {
				t.Errorf("changes %v, want quota, shares/weight and memory", changes(res))
			}
			st, err := k.fs.Read(r)
			if err != nil {
				t.Fatal(err)
			}
			if st.CPUQuota != want.CPUQuota || st.MemoryLimit != 256<<20/page*page {
				t.Errorf("read back quota %+v memory %d, want %+v and %d", st.CPUQuota, st.MemoryLimit, want.CPUQuota, 256<<20)
			}
			if (v == cgroup.V1 && st.CPUShares != 256) || (v == cgroup.V2 && st.CPUWeight != cgroups.ConvertCPUSharesToCgroupV2Value(256)) {
				t.Errorf("read back shares %d weight %d for 256 shares", st.CPUShares, st.CPUWeight)
			}
			if res := k.apply(r, want); len(res.Changes) != 0 {
				t.Errorf("re-apply wrote %v, want nothing (page rounding must compare equal)", changes(res))
			}
			cpuDir, _ := k.layout.ContainerDir(cgroup.CPU, r)
			deadline := time.Now().Add(3 * time.Second)
			for throttled(t, k, cpuDir) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("a spinning thread under a 10%% quota was never throttled (cpu.stat: %s)", k.read(cpuDir, "cpu.stat"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Period and quota both change; then limits are lifted.
			for _, q := range []cgroup.Quota{{QuotaUS: 20000, PeriodUS: 50000}, {QuotaUS: 5000, PeriodUS: 200000}, {QuotaUS: cgroup.QuotaUnlimited, PeriodUS: 100000}} {
				k.apply(r, cgroup.Resources{CPUQuota: q})
				if st, err := k.fs.Read(r); err != nil || st.CPUQuota != q {
					t.Errorf("quota %+v read back as %+v (%v)", q, st.CPUQuota, err)
				}
			}
			k.apply(r, cgroup.Resources{MemoryLimit: cgroup.MemoryUnlimited})
			if st, err := k.fs.Read(r); err != nil || st.MemoryLimit != cgroup.MemoryUnlimited {
				t.Errorf("memory limit read back as %d (%v), want unlimited", st.MemoryLimit, err)
			}
		})
	}
}

func throttled(t *testing.T, k *kernel, dir string) int {
	t.Helper()
	for _, line := range strings.Split(k.read(dir, "cpu.stat"), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("cpu.stat has no nr_throttled")
	return 0
}

// TestEnumerateReal lists the containers of a kubelet-shaped tree with the cpusets they carry.
func TestEnumerateReal(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		for _, d := range []cgroup.Driver{cgroup.Cgroupfs, cgroup.Systemd} {
			t.Run(v.String()+"/"+string(d), func(t *testing.T) {
				k := newKernel(t, v, d)
				rs := []cgroup.ContainerRef{ref(t, uidW, "Guaranteed", idW), ref(t, uidS, "Burstable", idS2), ref(t, uidT, "BestEffort", idS3)}
				for _, r := range rs {
					k.addContainer(r)
				}
				excl, _, exclMems := k.pools()
				k.apply(rs[0], cgroup.Resources{CPUs: excl, Mems: exclMems})
				got, err := k.fs.Enumerate()
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(rs) {
					t.Fatalf("enumerated %+v, want %d containers", got, len(rs))
				}
				for _, c := range got {
					wantCPUs := k.online
					if c.Ref == rs[0] {
						wantCPUs = excl
					}
					if !c.EffectiveCPUs.Equals(wantCPUs) || !slices.Contains(rs, c.Ref) {
						t.Errorf("enumerated %+v, want effective CPUs %s", c, wantCPUs)
					}
				}
			})
		}
	}
}
