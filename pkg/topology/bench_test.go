package topology

import (
	"os"
	"testing"
)

// Target: Discover on the paper's 2-socket node (xeon-e5-2697v4-2s) in at most 2 ms.
func BenchmarkDiscover(b *testing.B) {
	for _, name := range []string{"xeon-e5-2697v4-2s", "xeon-gold-6248-2s-smt", "epyc-7451-2s-smt"} {
		b.Run(name, func(b *testing.B) {
			root := fixtureRoot(name)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Discover(root); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("live-sys", func(b *testing.B) {
		if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
			b.Skipf("no sysfs on this machine: %v", err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Discover("/sys"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Target: every query the allocator calls on its hot path allocates nothing.
func BenchmarkQueries(b *testing.B) {
	topo := discoverFixture(b, "epyc-7451-2s-smt")
	n := topo.NumCPUs()
	var sink int
	queries := []struct {
		name string
		run  func(i int)
	}{
		{"CPU", func(i int) { c, _ := topo.CPU(i % n); sink += int(c.Core) }},
		{"Siblings", func(i int) { sink += topo.Siblings(i % n).Size() }},
		{"CPUsOfNUMANode", func(i int) { sink += topo.CPUsOfNUMANode(NUMAID(i % 8)).Size() }},
		{"NUMANodeOfCPU", func(i int) { sink += int(topo.NUMANodeOfCPU(i % n)) }},
		{"CoresOfNUMANode", func(i int) { sink += len(topo.CoresOfNUMANode(NUMAID(i % 8))) }},
		{"CoresOfL3Group", func(i int) { sink += len(topo.CoresOfL3Group(L3ID(i % 16))) }},
		{"Distance", func(i int) { sink += topo.Distance(NUMAID(i%8), NUMAID((i/8)%8)) }},
	}
	for _, q := range queries {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.run(i)
				i++
			}
		})
	}
	if sink == -1 {
		b.Log(sink)
	}
}
