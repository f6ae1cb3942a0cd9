// Package inspect owns the node agent's read-only HTTP surface and the views it serves: /metrics
// (Prometheus), /healthz and /readyz (named checks), /pins, a JSON view of which container holds
// which CPUs and what each NUMA node has free, and /processes, the processes the agent reads in
// its pinned containers' cgroups with their MPI ranks, allowed CPUs and memory nodes. The pins
// view is built from the agent's snapshot, from a checkpoint file, or from a published
// NodeResourceTopology object; both views are printed as tables by `nodeagent pins` and
// `kubectl finegrain`. It must not change the agent's state: every endpoint answers GET and HEAD
// only, and one process listing runs at a time.
package inspect
