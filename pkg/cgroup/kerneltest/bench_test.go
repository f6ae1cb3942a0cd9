package kerneltest

import (
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// BenchmarkApply measures one container's Apply on the real kernel with a 4-thread process
// inside: every value set (cpuset, quota, shares or weight, memory limit). "pin" changes only the
// cpuset each time (the agent's common case), "all" changes every value, "steady" changes
// nothing (the reconcile loop's drift check). Target: ≤ 1 ms per op.
func BenchmarkApply(b *testing.B) {
	for _, v := range []cgroup.Version{cgroup.V1, cgroup.V2} {
		b.Run(v.String(), func(b *testing.B) {
			k := newKernel(b, v, cgroup.Cgroupfs)
			r, err := cgroup.NewContainerRef(uidS, "Burstable", idS1)
			if err != nil {
				b.Fatal(err)
			}
			k.addContainer(r)
			k.start(4, "sleep", k.dirs(r)...)
			excl, pool, exclMems := k.pools()
			a := cgroup.Resources{CPUs: excl, Mems: exclMems, CPUQuota: cgroup.Quota{QuotaUS: 50000, PeriodUS: 100000}, CPUShares: 512, MemoryLimit: 512 << 20}
			c := cgroup.Resources{CPUs: pool, Mems: k.mems, CPUQuota: cgroup.Quota{QuotaUS: 20000, PeriodUS: 50000}, CPUShares: 256, MemoryLimit: 256 << 20}
			pinOnly := a
			pinOnly.CPUs, pinOnly.Mems = pool, k.mems
			for _, tc := range []struct {
				name   string
				states [2]cgroup.Resources
			}{{"pin", [2]cgroup.Resources{a, pinOnly}}, {"all", [2]cgroup.Resources{a, c}}, {"steady", [2]cgroup.Resources{a, a}}} {
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					writes := 0
					for i := 0; b.Loop(); i++ {
						res, err := k.fs.Apply(r, tc.states[i%2])
						if err != nil {
							b.Fatal(err)
						}
						writes += len(res.Changes)
					}
					b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
				})
			}
		})
	}
}
