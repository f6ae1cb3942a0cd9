// Package sim owns finegrain's workload simulator: a deterministic discrete-event simulation that
// replays a trace of MPI jobs (read from a file or drawn by a seeded generator) on a cluster of
// simulated nodes, once per deployment strategy, and reports response time, wait time, makespan
// and utilisation per strategy. The finegrain strategies run the placer's own code — the queue
// (pkg/placer/queue), granularity selection, MPI expansion and gang planning (pkg/placer/hpcjob,
// pkg/placer/plan) on a snapshot built (pkg/placer/snapshot) from the free-core maps the node
// agent's report builder (pkg/report) writes for each simulated node's real allocator
// (pkg/policy). The default-Kubernetes strategies model kube-scheduler and the kubelet's CPU
// manager. How long a job runs is decided by an explicit runtime model (Model) whose factors and
// defaults docs/simulator.md justifies.
//
// The package computes and decodes: traces and model files come in as bytes, and the only thing
// it reads itself is a sysfs tree named to LoadMachine. It must not talk to an API server, touch
// cgroups, or read the clock (simulated time only), so that a seed always gives the same result.
package sim
