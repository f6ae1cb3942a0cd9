package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// State is a collector that reads the agent's snapshot when scraped, so its gauges are never
// stale and cost nothing between scrapes.
type State struct {
	src  report.Source
	opts report.Options

	shared, reserved, pinned, generation *prometheus.Desc
	freeCPUs, freeCores, exclusive       *prometheus.Desc
	available                            *prometheus.Desc
}

var _ prometheus.Collector = (*State)(nil)

// NewState returns the collector of src's state; register it with a Registerer. opts make
// available_cpus agree with the published NodeResourceTopology.
func NewState(src report.Source, opts report.Options) *State {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil)
	}
	return &State{
		src:        src,
		opts:       opts,
		shared:     desc("shared_pool_cpus", "CPUs in the shared pool (neither reserved nor held exclusively)."),
		reserved:   desc("reserved_cpus", "CPUs reserved for the kubelet and system daemons."),
		pinned:     desc("pinned_containers", "Containers holding exclusive CPUs."),
		generation: desc("state_generation", "The agent's state generation; it grows with every change."),
		freeCPUs:   desc("free_cpus", "CPUs of the NUMA node in the shared pool, which exclusive requests can take.", "numa_node"),
		freeCores:  desc("free_cores", "Physical cores of the NUMA node whose every hardware thread is free.", "numa_node"),
		exclusive:  desc("exclusive_cpus", "CPUs of the NUMA node held exclusively by containers.", "numa_node"),
		available:  desc("available_cpus", "CPUs one exclusive request could get on the NUMA node now, as the NodeResourceTopology publishes it.", "numa_node"),
	}
}

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.shared, s.reserved, s.pinned, s.generation, s.freeCPUs, s.freeCores, s.exclusive, s.available} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	snap := s.src.Snapshot()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(s.shared, snap.Shared.Size())
	gauge(s.reserved, snap.Reserved.Size())
	gauge(s.pinned, len(snap.Pins))
	ch <- prometheus.MustNewConstMetric(s.generation, prometheus.GaugeValue, float64(snap.Generation))
	held := map[topology.NUMAID]int{}
	for _, p := range snap.Pins {
		held[p.NUMANode] += p.CPUs.Size()
	}
	for _, f := range snap.Free {
		if f.Capacity == 0 {
			continue
		}
		id := strconv.Itoa(int(f.NUMANode))
		gauge(s.freeCPUs, f.FreeCPUs.Size(), id)
		gauge(s.freeCores, f.FreeWholeCores, id)
		gauge(s.exclusive, held[f.NUMANode], id)
		gauge(s.available, s.opts.Available(f), id)
	}
}
