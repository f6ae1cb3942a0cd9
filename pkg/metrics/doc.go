// Package metrics owns the node agent's Prometheus metrics: counters and histograms fed by the
// agent's hooks (pins, allocations, releases, repairs, errors by reason, the unpinned window,
// checkpoint writes) and by the NodeResourceTopology publisher, and gauges read from the agent's
// state snapshot when scraped (shared pool, free CPUs and cores per NUMA node). Every method
// returns at once and never blocks the caller. It must not change the agent's state or serve
// HTTP (pkg/inspect does).
package metrics
