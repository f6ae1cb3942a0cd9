package report

import (
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Snapshot is the node agent's state at one moment, as reports need it. It is a value: the agent
// hands out a copy and never changes it afterwards.
type Snapshot struct {
	// Generation grows by at least one with every change of the state below.
	Generation uint64
	// Pins are the exclusive assignments, ordered by pod UID then container name.
	Pins []Pin
	// Shared is the shared pool; Reserved the CPUs kept for the kubelet and system daemons.
	Shared, Reserved cpuset.CPUSet
	// Free is policy.Allocator.Free(): every NUMA node's capacity and free CPUs, in node order.
	Free []policy.NUMAFree
	// SharedContainers are the containers the agent keeps in the shared pool, ordered like Pins;
	// nil when the source does not track them.
	SharedContainers []Container
	// Fingerprinted are the pods the pods fingerprint covers (nrt.MethodWithExclusiveResources:
	// the node's pods nrt.CountsInFingerprint counts), in any order. A source that does not watch
	// the node's pods gives the named pods of Pins (SnapshotOf).
	Fingerprinted []nrt.PodName
}

// Container names one container of a pod.
type Container struct {
	// Namespace and Pod are empty while the agent does not know them.
	PodUID, Namespace, Pod, Container string
}

// Pin is one container holding exclusive CPUs.
type Pin struct {
	// PodUID and Container identify the container; Namespace and Pod name its pod, and are empty
	// while the agent does not know them (a pin restored from a checkpoint before the pod was
	// listed).
	PodUID, Namespace, Pod, Container string
	// CPUs and Mems are the container's cpuset.cpus and cpuset.mems; NUMANode the node they lie in.
	CPUs, Mems cpuset.CPUSet
	NUMANode   topology.NUMAID
	// Memory is the container's memory request in bytes, memory its cpuset.mems keeps on
	// NUMANode; 0 when it has none or the source does not know the pod.
	Memory int64
	// Written is true once a live container cgroup carries the pin; a source that cannot tell
	// (an allocator, a checkpoint) leaves it false.
	Written bool
}

// Named reports whether the pin's pod is known by namespace and name.
func (p Pin) Named() bool { return p.Namespace != "" && p.Pod != "" }

// Source is where reports read the agent's state.
type Source interface {
	// Snapshot returns the current state; it is cheap and never blocks for long.
	Snapshot() Snapshot
	// Changed receives a value after the state changed. Notifications coalesce: one receive may
	// stand for many changes, so a reader takes a fresh Snapshot after each. The agent sends
	// without blocking and never closes the channel.
	Changed() <-chan struct{}
}
