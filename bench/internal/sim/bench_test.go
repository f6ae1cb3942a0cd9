package sim

import (
	"testing"
)

// BenchmarkSimulate replays 400 generated jobs on 16 nodes of the paper's machine under one
// strategy per sub-benchmark and reports simulated events per second of wall time.
func BenchmarkSimulate(b *testing.B) {
	topo := paperMachine(b)
	jobs, err := Generate(GenOptions{Jobs: 400, Seed: 1, Load: 0.5, ClusterCPUs: 16 * topo.NumCPUs(), Mix: DefaultMix})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{StrategyKube, StrategyKubeStatic, StrategyFinegrain, "finegrain-none-least", "finegrain-scale-least-exclusive"} {
		st, err := SelectStrategies([]string{name})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			events, plans := 0, 0
			for b.Loop() {
				r, err := Simulate(jobs, st[0], Options{Machine: topo, Nodes: 16, Model: DefaultModel(), Queue: DefaultQueueOptions(), SystemReservedCPUs: 1, SnapshotTTL: DefaultSnapshotTTL})
				if err != nil {
					b.Fatal(err)
				}
				events += r.Summary.Events
				plans += r.Summary.Plans
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(plans)/b.Elapsed().Seconds(), "plans/s")
		})
	}
}
