package snapshot

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/cpuset"
)

// NodeResourceTopology names (docs/interfaces.md).
const (
	nrtKind             = "NodeResourceTopology"
	nrtZoneTypeNode     = "Node"
	nrtZonePrefix       = "node-"
	attrFingerprint     = "nodeTopologyPodsFingerprint"
	attrGeneration      = "finegrain.dev/generation"
	attrFreeCPUs        = "finegrain.dev/free-cpus"
	attrPins            = "finegrain.dev/pins"
	nrtResourceCPU      = "cpu"
	nrtResourceMemory   = "memory"
	nrtAPIGroupVersion  = "topology.node.k8s.io/v1alpha2"
	pinEntrySeparator   = ";"
	pinKeyCPUsSeparator = "="
)

// nrtObject mirrors the parts of a NodeResourceTopology the placer reads.
type nrtObject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Attributes []nrtAttribute `json:"attributes"`
	Zones      []nrtZone      `json:"zones"`
}

type nrtAttribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type nrtZone struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Resources  []nrtResource  `json:"resources"`
	Attributes []nrtAttribute `json:"attributes"`
}

type nrtResource struct {
	Name        string             `json:"name"`
	Capacity    *resource.Quantity `json:"capacity"`
	Allocatable *resource.Quantity `json:"allocatable"`
	Available   *resource.Quantity `json:"available"`
}

// nodeTopology is one node's free-core map as the placer uses it.
type nodeTopology struct {
	zones       []Zone
	pinned      map[string]int // "namespace/pod" → NUMA node listing it in its pins
	fingerprint string
	generation  int64
	// warnings are problems that leave the map usable (a malformed pins entry).
	warnings []string
}

func attribute(attrs []nrtAttribute, name string) (string, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// parseNRT reads one NodeResourceTopology. An error means the node cannot take pinned workers;
// it names the object and the field at fault.
func parseNRT(u *unstructured.Unstructured) (*nodeTopology, error) {
	var obj nrtObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return nil, fmt.Errorf("NodeResourceTopology %s does not have the %s shape: %w", u.GetName(), nrtAPIGroupVersion, err)
	}
	t := &nodeTopology{pinned: map[string]int{}}
	t.fingerprint, _ = attribute(obj.Attributes, attrFingerprint)
	if g, ok := attribute(obj.Attributes, attrGeneration); ok {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s: attribute %s=%q is not an integer", obj.Metadata.Name, attrGeneration, g))
		}
		t.generation = n
	}
	seen := map[int]bool{}
	for i := range obj.Zones {
		z := &obj.Zones[i]
		if z.Type != nrtZoneTypeNode {
			continue
		}
		zone, err := parseZone(z, t, obj.Metadata.Name)
		if err != nil {
			return nil, fmt.Errorf("NodeResourceTopology %s zone %q: %w", obj.Metadata.Name, z.Name, err)
		}
		if seen[zone.NUMA] {
			return nil, fmt.Errorf("NodeResourceTopology %s lists NUMA node %d twice", obj.Metadata.Name, zone.NUMA)
		}
		seen[zone.NUMA] = true
		t.zones = append(t.zones, zone)
	}
	if len(t.zones) == 0 {
		return nil, fmt.Errorf("NodeResourceTopology %s has no zone of type %s", obj.Metadata.Name, nrtZoneTypeNode)
	}
	return t, nil
}

func parseZone(z *nrtZone, t *nodeTopology, object string) (Zone, error) {
	idText, ok := strings.CutPrefix(z.Name, nrtZonePrefix)
	id, err := strconv.Atoi(idText)
	if !ok || err != nil || id < 0 {
		return Zone{}, fmt.Errorf("zone name must be %s<NUMA id>", nrtZonePrefix)
	}
	freeText, ok := attribute(z.Attributes, attrFreeCPUs)
	if !ok {
		return Zone{}, fmt.Errorf("no %s attribute: the node agent has not published a free-core map", attrFreeCPUs)
	}
	free, err := cpuset.Parse(freeText)
	if err != nil {
		return Zone{}, fmt.Errorf("attribute %s=%q is not a CPU list: %w", attrFreeCPUs, freeText, err)
	}
	zone := Zone{NUMA: id, FreeCPUs: free.Size(), FreeCPUList: freeText, FreeMemory: -1}
	for _, r := range z.Resources {
		switch r.Name {
		case nrtResourceCPU:
			if r.Available != nil {
				zone.FreeCPUs = min(zone.FreeCPUs, max(int(r.Available.Value()), 0))
			}
		case nrtResourceMemory:
			if r.Available != nil {
				zone.FreeMemory = max(r.Available.Value(), 0)
			}
			if r.Allocatable != nil {
				zone.allocatableMemory = max(r.Allocatable.Value(), 0)
			}
		}
	}
	if pins, ok := attribute(z.Attributes, attrPins); ok {
		for entry := range strings.SplitSeq(pins, pinEntrySeparator) {
			if entry == "" {
				continue
			}
			pod, err := parsePin(entry)
			if err != nil {
				t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s zone %s: pins entry %q ignored (%v); its pod's cores are held as assumed", object, z.Name, entry, err))
				continue
			}
			t.pinned[pod] = id
		}
	}
	return zone, nil
}

// parsePin reads "namespace/pod/container=cpus" and returns "namespace/pod".
func parsePin(entry string) (string, error) {
	key, cpus, ok := strings.Cut(entry, pinKeyCPUsSeparator)
	if !ok {
		return "", fmt.Errorf("want namespace/pod/container=cpus")
	}
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", fmt.Errorf("want namespace/pod/container before %q", pinKeyCPUsSeparator)
	}
	if _, err := cpuset.Parse(cpus); err != nil {
		return "", fmt.Errorf("CPU list %q: %w", cpus, err)
	}
	return parts[0] + "/" + parts[1], nil
}
