// Package inspect owns the node agent's read-only HTTP surface and the pins view: /metrics
// (Prometheus), /healthz and /readyz (named checks), and /pins, a JSON view of which container
// holds which CPUs and what each NUMA node has free. The same view is built from the agent's
// snapshot, from a checkpoint file, or from a published NodeResourceTopology object, and printed
// as a table by `nodeagent pins` and `kubectl finegrain`. It must not change the agent's state:
// every endpoint answers GET and HEAD only.
package inspect
