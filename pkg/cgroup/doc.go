// Package cgroup owns finegrain's enforcement on the kubelet's container cgroups: it finds a
// container's cgroup directories from validated API-server identifiers (pod UID, QoS class,
// container ID) for the kubelet's cgroupfs and systemd drivers, with containerd and CRI-O naming,
// on cgroup v1 and v2; parses such directories back into identifiers (for inotify events and
// restarts); turns desired values (cpuset.cpus/mems, with v1's memory_migrate for a pin; CPU
// quota, shares/weight, memory limit) into a plan of file writes that honours the kernel's
// ordering rules; and performs the writes in one place through github.com/opencontainers/cgroups,
// writing only what differs and reporting what it did; likewise a pod's block I/O bandwidth
// limits (v1 blkio.throttle.{read,write}_bps_device on each container, v2 io.max on the pod), on
// devices the caller found on the node, never named by a pod. It also lists what runs in a container's
// cgroup (ProcessReader): the PIDs in its cgroup.procs and, from /proc, each process's name,
// allowed CPUs and memory nodes, and its MPI rank from the three rank variables of its
// environment, bounded in memory and bytes read. It must not decide allocations (pkg/policy
// does), create or remove cgroups, write cgroups outside the kubelet's kubepods tree, take a
// path or a value it acts on from anything a pod author can write, or report any other part of
// a process's environment.
package cgroup
