package nrt

import (
	"fmt"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2/helper/attribute"
	"github.com/k8stopologyawareschedwg/podfingerprint"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API the objects belong to.
const (
	Group    = "topology.node.k8s.io"
	Version  = "v1alpha2"
	Kind     = "NodeResourceTopology"
	Resource = "noderesourcetopologies"
)

// GroupVersionResource addresses NodeResourceTopology objects through the dynamic client.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Names of docs/interfaces.md. The first five are the ones scheduler-plugins' NodeResourceTopology
// plugins read; the finegrain.dev ones are finegrain's.
const (
	// AttrTopologyManagerPolicy and AttrTopologyManagerScope say how the node aligns resources.
	AttrTopologyManagerPolicy = "topologyManagerPolicy"
	AttrTopologyManagerScope  = "topologyManagerScope"
	// AttrPodsFingerprint is PodsFingerprint over the pods the object accounts for;
	// AttrPodsFingerprintMethod says which pods those are (MethodWithExclusiveResources).
	AttrPodsFingerprint       = podfingerprint.Attribute
	AttrPodsFingerprintMethod = podfingerprint.AttributeMethod
	// AttrGeneration is the agent's state generation the object shows; it grows with every change.
	AttrGeneration = "finegrain.dev/generation"
	// AttrSharedCPUs is the shared pool in kernel list format.
	AttrSharedCPUs = "finegrain.dev/shared-cpus"
	// AttrExclusiveAvailable is how many CPUs exclusive requests can still take on the whole node
	// together: the shared pool minus its minimum (in whole cores when requests may not split
	// them). A zone's cpu available counts each zone on its own; this bounds their sum.
	AttrExclusiveAvailable = "finegrain.dev/exclusive-available"
	// AttrMinSharedCPUs is the smallest shared pool the agent keeps (its --min-shared-cpus).
	AttrMinSharedCPUs = "finegrain.dev/min-shared-cpus"
	// AttrFreeCPUs (per zone) is the zone's CPUs in the shared pool: what exclusive requests can
	// still be given, in kernel list format.
	AttrFreeCPUs = "finegrain.dev/free-cpus"
	// AttrPins (per zone) lists the zone's exclusive pins (FormatPins).
	AttrPins = "finegrain.dev/pins"
	// AttrSockets, AttrCoresPerSocket and AttrThreadsPerCore are the node's CPU layout, as
	// Slurm's NodeName lines give it (the virtual cluster controller copies them there):
	// CoresPerSocket is the online cores divided by the sockets, ThreadsPerCore the online CPUs
	// divided by the cores.
	AttrSockets        = "finegrain.dev/sockets"
	AttrCoresPerSocket = "finegrain.dev/cores-per-socket"
	AttrThreadsPerCore = "finegrain.dev/threads-per-core"
)

// Values finegrain publishes.
const (
	// PolicySingleNUMANode and ScopeContainer: every pinned container gets CPUs of one NUMA node.
	PolicySingleNUMANode = "single-numa-node"
	ScopeContainer       = "container"
	// MethodWithExclusiveResources: the fingerprint covers the pods of the node that hold
	// exclusive resources as scheduler-plugins counts them (HoldsExclusiveResources).
	MethodWithExclusiveResources = podfingerprint.MethodWithExclusiveResources
	// ZoneTypeNode is the type of a NUMA node's zone; ZonePrefix starts its name ("node-0").
	ZoneTypeNode = "Node"
	ZonePrefix   = "node-"
	// ResourceCPU counts whole logical CPUs; ResourceMemory bytes.
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// ZoneName returns the name of NUMA node id's zone.
func ZoneName(id int) string { return fmt.Sprintf("%s%d", ZonePrefix, id) }

// The object's wire types are the NodeResourceTopology API's own Go types
// (github.com/k8stopologyawareschedwg/noderesourcetopology-api, v1alpha2), the ones
// scheduler-plugins and node-feature-discovery decode into, so what finegrain writes is by
// construction what they read.
type (
	// NodeResourceTopology is one node's object. finegrain leaves its deprecated TopologyPolicies
	// empty: readers take the policy from the AttrTopologyManagerPolicy and
	// AttrTopologyManagerScope attributes.
	NodeResourceTopology = v1alpha2.NodeResourceTopology
	// Zone is one part of the node: for finegrain, a NUMA node.
	Zone = v1alpha2.Zone
	// Cost is the distance from a zone to the zone named Name.
	Cost = v1alpha2.CostInfo
	// Attribute is a named string.
	Attribute = v1alpha2.AttributeInfo
	// ResourceInfo is one resource's amounts in a zone.
	ResourceInfo = v1alpha2.ResourceInfo
)

// AttributeValue returns the value of the named attribute of attrs (an object's or a zone's
// Attributes), the first one when the list names it more than once.
func AttributeValue(attrs []Attribute, name string) (string, bool) {
	a, ok := attribute.Get(attrs, name)
	return a.Value, ok
}

// ZoneResource returns the named resource of the zone.
func ZoneResource(z *Zone, name string) (ResourceInfo, bool) {
	for _, r := range z.Resources {
		if r.Name == name {
			return r, true
		}
	}
	return ResourceInfo{}, false
}

// ToUnstructured converts the object for the dynamic client, with apiVersion and kind set and
// without the empty creationTimestamp a typed ObjectMeta would add.
func ToUnstructured(o *NodeResourceTopology) (*unstructured.Unstructured, error) {
	c := *o
	c.APIVersion, c.Kind = Group+"/"+Version, Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return nil, fmt.Errorf("convert NodeResourceTopology %s: %w", o.Name, err)
	}
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: m}, nil
}

// FromUnstructured reads an object the dynamic client returned. It checks the shape, not the
// content: fields of the wrong type fail, unknown fields are ignored.
func FromUnstructured(u *unstructured.Unstructured) (*NodeResourceTopology, error) {
	if gv := u.GetAPIVersion(); gv != "" && gv != Group+"/"+Version {
		return nil, fmt.Errorf("NodeResourceTopology %s has apiVersion %s; this reader understands %s/%s", u.GetName(), gv, Group, Version)
	}
	var o NodeResourceTopology
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
		return nil, fmt.Errorf("NodeResourceTopology %s does not have the %s/%s shape: %w", u.GetName(), Group, Version, err)
	}
	return &o, nil
}
