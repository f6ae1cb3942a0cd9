// Package agent owns the finegrain node agent's core: it keeps, for the pods of one node, which
// containers hold exclusive cores (through pkg/policy), and drives every container cgroup below
// kubepods to its decision through pkg/cgroup — exclusive cpuset.cpus/cpuset.mems for pinned
// containers, the shared pool (with the configured CPU quota and memory limit) for every other
// one. It learns of pods from an informer restricted to its node, of new container cgroups from
// inotify (cgwatch) and of container names from the CRI runtime (cri) or the pods' statuses;
// it repairs drift on a timer, checkpoints after every allocation change, rebuilds its state
// from checkpoint + cgroups + API server on start, and refuses to act next to a kubelet running
// the static CPU manager policy. It offers a read-only Snapshot with change notifications, a
// listing of the processes in its pinned containers' cgroups (through pkg/cgroup), a Hooks
// interface for reporting, and Decide/ReleasePod for a synchronous caller such as an NRI
// plugin. It also enforces the block I/O bandwidth the placer's ServiceObjective loop decides
// (status.podSize.ioBandwidth of the objective whose target owns a pod, found through uid-checked
// controller references) on the node's whole disks, and clears it when no objective holds the
// pod. It must not write cgroups outside kubepods, take a path or cpuset from anything a pod
// author wrote, publish metrics or NodeResourceTopology objects itself, or write to the API
// server other than events.
package agent
