package report

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// NodeRef names the Node an object belongs to; its UID goes into the ownerReference, so the
// object is deleted with the Node.
type NodeRef struct {
	Name string
	UID  types.UID
}

// Options shape the published numbers.
type Options struct {
	// WholeCores makes a zone's available cpu count only CPUs in free whole cores: what a request
	// that may not split physical cores can still get there. Set it when the agent does not let
	// requests split cores (its default on SMT machines); without SMT it changes nothing.
	WholeCores bool
	// MinSharedCPUs is the smallest shared pool the agent keeps (policy.Config.MinSharedCPUs);
	// below 1 counts as 1, the least the agent allows.
	MinSharedCPUs int
}

// minShared is MinSharedCPUs, at least 1.
func (o Options) minShared() int { return max(o.MinSharedCPUs, 1) }

// ExclusiveAvailable returns the CPUs exclusive requests can still take on the whole node
// together, under o: the free CPUs of every NUMA node minus the shared pool's minimum, and with
// WholeCores only whole free cores (tpc threads each). Each NUMA node's own figure (Available)
// may be larger; the sum of several is bounded by this.
func (o Options) ExclusiveAvailable(free []policy.NUMAFree, tpc int) int {
	cpus, cores := 0, 0
	for _, f := range free {
		cpus += f.FreeCPUs.Size()
		cores += f.FreeWholeCores
	}
	spare := max(cpus-o.minShared(), 0)
	if !o.WholeCores || tpc <= 1 {
		return spare
	}
	return min(cores, spare/tpc) * tpc
}

// Available returns the CPUs one exclusive request could get in the NUMA node now, under o.
func (o Options) Available(f policy.NUMAFree) int {
	if o.WholeCores {
		return f.AvailableAligned
	}
	return f.Available
}

// UnknownNamespace stands for the namespace of a pin whose pod the agent cannot name yet; the pod
// is then written by UID. It is outside the API's name charset, so it never names a real pod.
const UnknownNamespace = "?"

// ErrNoState is wrapped by Build when the snapshot lists no NUMA node: the agent has not rebuilt
// its state yet, and an object built from it would claim the node has no CPUs.
var ErrNoState = errors.New("the snapshot lists no NUMA node; the agent has not rebuilt its state yet")

// Build returns the NodeResourceTopology object for one node: a zone node-<id> per NUMA node of
// snap.Free, with cpu capacity (online CPUs), allocatable (minus reserved) and available (what one
// exclusive request could get now, see Options), memory capacity and allocatable (the NUMA node's
// memory) and available (minus the memory requests of the containers pinned there), costs from
// the NUMA distances, and the free-cpus and pins attributes; at the top, the alignment policy, the
// pods fingerprint over snap.Fingerprinted and its method, the generation, the shared pool, its
// minimum and what exclusive requests can still take on the whole node. It fails when the
// snapshot does not match the topology.
func Build(node NodeRef, topo *topology.Topology, snap Snapshot, opts Options) (*nrt.NodeResourceTopology, error) {
	if node.Name == "" || node.UID == "" {
		return nil, fmt.Errorf("build NodeResourceTopology: the node's name (%q) and UID (%q) are both needed", node.Name, node.UID)
	}
	if len(snap.Free) == 0 {
		return nil, fmt.Errorf("build NodeResourceTopology %s: %w", node.Name, ErrNoState)
	}
	zoneOf := make(map[topology.NUMAID]int, len(snap.Free))
	for i, f := range snap.Free {
		if _, ok := topo.NUMANode(f.NUMANode); !ok {
			return nil, fmt.Errorf("build NodeResourceTopology %s: free list names NUMA node %d, which the topology lacks", node.Name, f.NUMANode)
		}
		zoneOf[f.NUMANode] = i
	}
	pinsByZone := make([][]nrt.PinEntry, len(snap.Free))
	memoryByZone := make([]int64, len(snap.Free))
	for _, p := range snap.Pins {
		z, ok := zoneOf[p.NUMANode]
		if !ok {
			return nil, fmt.Errorf("build NodeResourceTopology %s: container %q of pod %s is pinned on NUMA node %d, which the free list lacks", node.Name, p.Container, p.PodUID, p.NUMANode)
		}
		name := nrt.PodName{Namespace: p.Namespace, Name: p.Pod}
		if !p.Named() {
			name = nrt.PodName{Namespace: UnknownNamespace, Name: p.PodUID}
		}
		pinsByZone[z] = append(pinsByZone[z], nrt.PinEntry{Namespace: name.Namespace, Pod: name.Name, Container: p.Container, CPUs: p.CPUs})
		memoryByZone[z] += max(p.Memory, 0)
	}

	obj := &nrt.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		},
		Zones: make([]nrt.Zone, 0, len(snap.Free)),
		Attributes: []nrt.Attribute{
			{Name: nrt.AttrTopologyManagerPolicy, Value: nrt.PolicySingleNUMANode},
			{Name: nrt.AttrTopologyManagerScope, Value: nrt.ScopeContainer},
			{Name: nrt.AttrPodsFingerprint, Value: nrt.PodsFingerprint(snap.Fingerprinted)},
			{Name: nrt.AttrPodsFingerprintMethod, Value: nrt.MethodWithExclusiveResources},
			{Name: nrt.AttrGeneration, Value: strconv.FormatUint(snap.Generation, 10)},
			{Name: nrt.AttrSharedCPUs, Value: snap.Shared.String()},
			{Name: nrt.AttrMinSharedCPUs, Value: strconv.Itoa(opts.minShared())},
			{Name: nrt.AttrExclusiveAvailable, Value: strconv.Itoa(opts.ExclusiveAvailable(snap.Free, topo.ThreadsPerCore()))},
		},
	}
	obj.Attributes = append(obj.Attributes, layoutAttributes(topo)...)
	for i, f := range snap.Free {
		obj.Zones = append(obj.Zones, zone(topo, f, pinsByZone[i], memoryByZone[i], opts))
	}
	return obj, nil
}

func zone(topo *topology.Topology, f policy.NUMAFree, pins []nrt.PinEntry, pinnedMemory int64, opts Options) nrt.Zone {
	available := opts.Available(f)
	z := nrt.Zone{
		Name: nrt.ZoneName(int(f.NUMANode)),
		Type: nrt.ZoneTypeNode,
		Attributes: []nrt.Attribute{
			{Name: nrt.AttrFreeCPUs, Value: f.FreeCPUs.String()},
			{Name: nrt.AttrPins, Value: nrt.FormatPins(pins)},
		},
		Resources: []nrt.ResourceInfo{{
			Name:        nrt.ResourceCPU,
			Capacity:    *resource.NewQuantity(int64(f.Capacity), resource.DecimalSI),
			Allocatable: *resource.NewQuantity(int64(f.Allocatable), resource.DecimalSI),
			Available:   *resource.NewQuantity(int64(available), resource.DecimalSI),
		}},
	}
	n, _ := topo.NUMANode(f.NUMANode)
	if n.MemoryBytes > 0 {
		mem := *resource.NewQuantity(int64(n.MemoryBytes), resource.DecimalSI)
		free := *resource.NewQuantity(max(int64(n.MemoryBytes)-pinnedMemory, 0), resource.DecimalSI)
		z.Resources = append(z.Resources, nrt.ResourceInfo{Name: nrt.ResourceMemory, Capacity: mem, Allocatable: mem, Available: free})
	}
	for _, to := range topo.NUMANodes {
		if d := topo.Distance(f.NUMANode, to.ID); d > 0 {
			z.Costs = append(z.Costs, nrt.Cost{Name: nrt.ZoneName(int(to.ID)), Value: int64(d)})
		}
	}
	return z
}

// layoutAttributes are the node's sockets, cores per socket and threads per core, whole numbers
// as Slurm's NodeName lines want them: cores and CPUs divided evenly (a node with offline CPUs
// rounds down).
func layoutAttributes(topo *topology.Topology) []nrt.Attribute {
	sockets := max(len(topo.Sockets), 1)
	cores := max(len(topo.Cores), 1)
	return []nrt.Attribute{
		{Name: nrt.AttrSockets, Value: strconv.Itoa(sockets)},
		{Name: nrt.AttrCoresPerSocket, Value: strconv.Itoa(cores / sockets)},
		{Name: nrt.AttrThreadsPerCore, Value: strconv.Itoa(topo.NumCPUs() / cores)},
	}
}
