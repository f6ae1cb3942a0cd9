// Package nri owns the node agent's NRI plugin (Node Resource Interface, containerd ≥ 2.0 and
// CRI-O ≥ 1.26): it answers the runtime's CreateContainer with the container's cpuset.cpus and
// cpuset.mems from the agent's allocator (agent.Decide), so a pinned worker's cgroup carries its
// exclusive CPUs before runc starts its first process, and narrows the running shared containers in
// the same reply when a new pin shrinks the shared pool. It reconciles on Synchronize, keeps pins
// through UpdateContainer (in-place resize), releases a pod's CPUs when its sandbox is removed,
// validates every container adjustment (so a killed or hung plugin fails closed when the runtime
// requires it) and reconnects forever with back-off. It also tells whether the NRI path can be
// used on this node (Select).
//
// It must not do I/O to the API server or write cgroups while the runtime waits for an answer:
// the runtime serialises every container creation of the node behind one lock, so a slow hook
// stalls the node. It takes no cpuset from anything a pod author wrote: a pod's labels and
// annotations only decide whether to wait for the agent to know the pod.
package nri
