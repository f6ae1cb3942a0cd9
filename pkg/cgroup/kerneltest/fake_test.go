package kerneltest

import (
	"errors"
	"slices"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cgroup/cgrouptest"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

// TestRecorderMatchesRealWriter drives the recording fake and the real writer with the same
// calls and requires the same observable answers (files, old and new contents, vanishing), so
// unit tests built on the fake exercise what the kernel-backed writer really does.
func TestRecorderMatchesRealWriter(t *testing.T) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		t.Run(v.String(), func(t *testing.T) {
			k := newKernel(t, v, cgroup.Cgroupfs)
			r := ref(t, uidS, "Burstable", idS1)
			k.addContainer(r)
			st, err := k.fs.Read(r)
			if err != nil {
				t.Fatal(err)
			}
			rec := cgrouptest.NewRecorder(v)
			// A fresh container cgroup: its parent's cpuset on v1 (empty, i.e. inherited, on
			// v2), no quota, default shares (weight 100), no memory limit.
			rec.Add(r, cgroup.Resources{CPUs: st.CPUs, Mems: st.Mems, CPUQuota: st.CPUQuota, CPUShares: 1024, MemoryLimit: st.MemoryLimit})
			excl, pool, exclMems := k.pools()
			for i, want := range []cgroup.Resources{
				cgroup.Exclusive(excl, exclMems),
				cgroup.Exclusive(excl, exclMems),
				{CPUs: pool, Mems: k.mems, CPUQuota: cgroup.Quota{QuotaUS: 20000, PeriodUS: 100000}, CPUShares: 512},
				{CPUQuota: cgroup.Quota{QuotaUS: 30000, PeriodUS: 50000}, MemoryLimit: 128<<20 + 7},
				{CPUs: k.online, CPUQuota: cgroup.Quota{QuotaUS: cgroup.QuotaUnlimited, PeriodUS: 100000}, MemoryLimit: cgroup.MemoryUnlimited},
				{CPUShares: 1},
			} {
				fromFS, realErr := k.fs.Apply(r, want)
				fromFake, fakeErr := rec.Apply(r, want)
				if (realErr == nil) != (fakeErr == nil) {
					t.Fatalf("call %d: real error %v, fake error %v", i, realErr, fakeErr)
				}
				if diff := cmp.Diff(triples(fromFS), triples(fromFake)); diff != "" {
					t.Errorf("call %d %+v: changes (-real +fake):\n%s", i, want, diff)
				}
				if !fromFS.EffectiveCPUs.Equals(fromFake.EffectiveCPUs) {
					t.Errorf("call %d: effective CPUs real %s, fake %s", i, fromFS.EffectiveCPUs, fromFake.EffectiveCPUs)
				}
			}
			k.removeContainer(r)
			rec.Remove(r)
			_, realErr := k.fs.Apply(r, cgroup.Resources{CPUs: cpuset.New(k.online.List()[0])})
			_, fakeErr := rec.Apply(r, cgroup.Resources{CPUs: cpuset.New(k.online.List()[0])})
			if !errors.Is(realErr, cgroup.ErrVanished) || !errors.Is(fakeErr, cgroup.ErrVanished) {
				t.Errorf("after removal: real %v, fake %v; want ErrVanished from both", realErr, fakeErr)
			}
		})
	}
}

// triples returns a result's changes as sorted "file: old -> new" strings (the real writer
// may order a v1 period and quota either way).
func triples(res cgroup.Result) []string {
	var out []string
	for _, w := range res.Changes {
		out = append(out, w.File+": "+w.Old+" -> "+w.New)
	}
	slices.Sort(out)
	return out
}
