// Package agentbench holds what the benches that measure finegrain's node agent on a live
// cluster node share (bench/nriproof, bench/pinwindow): the command's frame (flags naming the
// cluster and the agent's DaemonSet, signals, exit codes, the JSON file), the run's own namespace,
// rolling the agent's DaemonSet out with other arguments and back to the ones it was found with,
// polling with a limit, and nearest-rank summaries of measured durations. It never creates
// workers, reads cgroups or decides what a bench measures; the commands do that.
package agentbench
