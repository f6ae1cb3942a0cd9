package snapshot

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NodeResourceTopology names (docs/interfaces.md).
const (
	nrtKind             = "NodeResourceTopology"
	nrtZoneTypeNode     = "Node"
	nrtZonePrefix       = "node-"
	attrFingerprint     = "nodeTopologyPodsFingerprint"
	attrGeneration      = "finegrain.dev/generation"
	attrFreeCPUs        = "finegrain.dev/free-cpus"
	attrExclusive       = "finegrain.dev/exclusive-available"
	attrMinShared       = "finegrain.dev/min-shared-cpus"
	attrPins            = "finegrain.dev/pins"
	nrtResourceCPU      = "cpu"
	nrtResourceMemory   = "memory"
	nrtAPIGroupVersion  = "topology.node.k8s.io/v1alpha2"
	pinEntrySeparator   = ";"
	pinKeyCPUsSeparator = "="
)

// nodeTopology is one node's free-core map as the placer uses it.
type nodeTopology struct {
	zones       []Zone
	pinned      map[string]int // "namespace/pod" → NUMA node listing it in its pins
	fingerprint string
	generation  int64
	// exclusive is how many CPUs pinned pods can still take on the node together; capacity how
	// many they could take with nothing running.
	exclusive, capacity int
	// warnings are problems that leave the map usable (a malformed pins entry).
	warnings []string
}

// shapeError says an object does not have the NodeResourceTopology shape at a path.
func shapeError(object, path, what string) error {
	return fmt.Errorf("NodeResourceTopology %s does not have the %s shape: %s %s", object, nrtAPIGroupVersion, path, what)
}

// attributesOf reads a list of {name, value} attributes.
func attributesOf(v any, object, path string) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, shapeError(object, path, "is not a list")
	}
	out := make(map[string]string, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		name, nok := m["name"].(string)
		value, vok := m["value"].(string)
		if !ok || !nok || !vok {
			return nil, shapeError(object, fmt.Sprintf("%s[%d]", path, i), "is not a {name, value} pair of strings")
		}
		out[name] = value
	}
	return out, nil
}

// quantityOf reads a resource amount written as a string or a number.
func quantityOf(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0, err
		}
		return q.Value(), nil
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	}
	return 0, fmt.Errorf("%v is neither a string nor a number", v)
}

// parseNRT reads one NodeResourceTopology. An error means the node cannot take pinned workers;
// it names the object and the field at fault. It walks the unstructured object directly (this
// runs for every node on every snapshot) and never expands a CPU list.
func parseNRT(u *unstructured.Unstructured) (*nodeTopology, error) {
	name := u.GetName()
	attrs, err := attributesOf(u.Object["attributes"], name, "attributes")
	if err != nil {
		return nil, err
	}
	t := &nodeTopology{pinned: map[string]int{}, fingerprint: attrs[attrFingerprint]}
	if g, ok := attrs[attrGeneration]; ok {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s: attribute %s=%q is not an integer", name, attrGeneration, g))
		}
		t.generation = n
	}
	zones, ok := u.Object["zones"].([]any)
	if !ok && u.Object["zones"] != nil {
		return nil, shapeError(name, "zones", "is not a list")
	}
	seen := map[int]bool{}
	freeSum := 0
	for i, item := range zones {
		z, ok := item.(map[string]any)
		if !ok {
			return nil, shapeError(name, fmt.Sprintf("zones[%d]", i), "is not an object")
		}
		if typ, _ := z["type"].(string); typ != nrtZoneTypeNode {
			continue
		}
		zname, _ := z["name"].(string)
		zone, free, err := parseZone(z, t, name, i)
		if err != nil {
			return nil, fmt.Errorf("NodeResourceTopology %s zone %q: %w", name, zname, err)
		}
		freeSum += free
		if seen[zone.NUMA] {
			return nil, fmt.Errorf("NodeResourceTopology %s lists NUMA node %d twice", name, zone.NUMA)
		}
		seen[zone.NUMA] = true
		t.zones = append(t.zones, zone)
	}
	if len(t.zones) == 0 {
		return nil, fmt.Errorf("NodeResourceTopology %s has no zone of type %s", name, nrtZoneTypeNode)
	}
	t.nodeWide(attrs, name, freeSum)
	return t, nil
}

// nodeWide sets what pinned pods can take on the whole node. An agent that does not publish it
// (an older one) is taken to keep a shared pool of one CPU, the least any agent keeps.
func (t *nodeTopology) nodeWide(attrs map[string]string, object string, freeSum int) {
	number := func(attr string) (int, bool) {
		v, ok := attrs[attr]
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s: attribute %s=%q is not a count of CPUs; taken as absent", object, attr, v))
			return 0, false
		}
		return n, true
	}
	minShared, ok := number(attrMinShared)
	if !ok || minShared < 1 {
		minShared = 1
	}
	allocatable := 0
	for _, z := range t.zones {
		allocatable += z.allocatableCPUs
	}
	t.capacity = max(allocatable-minShared, 0)
	if n, ok := number(attrExclusive); ok {
		t.exclusive = n
	} else {
		t.exclusive = max(freeSum-minShared, 0)
	}
}

// parseZone reads one NUMA node's zone; it also returns the size of its free-cpus list.
func parseZone(z map[string]any, t *nodeTopology, object string, index int) (Zone, int, error) {
	zname, _ := z["name"].(string)
	idText, ok := strings.CutPrefix(zname, nrtZonePrefix)
	id, err := strconv.Atoi(idText)
	if !ok || err != nil || id < 0 {
		return Zone{}, 0, fmt.Errorf("zone name must be %s<NUMA id>", nrtZonePrefix)
	}
	path := fmt.Sprintf("zones[%d]", index)
	attrs, err := attributesOf(z["attributes"], object, path+".attributes")
	if err != nil {
		return Zone{}, 0, err
	}
	freeText, ok := attrs[attrFreeCPUs]
	if !ok {
		return Zone{}, 0, fmt.Errorf("no %s attribute: the node agent has not published a free-core map", attrFreeCPUs)
	}
	free, err := cpuListSize(freeText)
	if err != nil {
		return Zone{}, 0, fmt.Errorf("attribute %s=%q is not a CPU list: %w", attrFreeCPUs, freeText, err)
	}
	zone := Zone{NUMA: id, FreeCPUs: free, FreeCPUList: freeText, FreeMemory: -1, allocatableCPUs: free}
	resources, ok := z["resources"].([]any)
	if !ok && z["resources"] != nil {
		return Zone{}, 0, shapeError(object, path+".resources", "is not a list")
	}
	for i, item := range resources {
		r, ok := item.(map[string]any)
		if !ok {
			return Zone{}, 0, shapeError(object, fmt.Sprintf("%s.resources[%d]", path, i), "is not an object")
		}
		rname, _ := r["name"].(string)
		if rname != nrtResourceCPU && rname != nrtResourceMemory {
			continue
		}
		amount := func(field string) (int64, bool, error) {
			v, ok := r[field]
			if !ok || v == nil {
				return 0, false, nil
			}
			n, err := quantityOf(v)
			if err != nil {
				return 0, false, shapeError(object, fmt.Sprintf("%s.resources[%d].%s", path, i, field), "is not a quantity: "+err.Error())
			}
			return n, true, nil
		}
		avail, hasAvail, err := amount("available")
		if err != nil {
			return Zone{}, 0, err
		}
		alloc, hasAlloc, err := amount("allocatable")
		if err != nil {
			return Zone{}, 0, err
		}
		switch rname {
		case nrtResourceCPU:
			if hasAvail {
				zone.FreeCPUs = min(zone.FreeCPUs, int(max(avail, 0)))
			}
			if hasAlloc {
				zone.allocatableCPUs = int(min(max(alloc, 0), maxCPUID))
			}
		case nrtResourceMemory:
			if hasAvail {
				zone.FreeMemory = max(avail, 0)
			}
			if hasAlloc {
				zone.allocatableMemory = max(alloc, 0)
			}
		}
	}
	if pins, ok := attrs[attrPins]; ok {
		for entry := range strings.SplitSeq(pins, pinEntrySeparator) {
			if entry == "" {
				continue
			}
			pod, err := parsePin(entry)
			if err != nil {
				t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s zone %s: pins entry %q ignored (%v); its pod's cores are held as assumed", object, zname, entry, err))
				continue
			}
			t.pinned[pod] = id
		}
	}
	return zone, free, nil
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
	if _, err := cpuListSize(cpus); err != nil {
		return "", fmt.Errorf("CPU list %q: %w", cpus, err)
	}
	return parts[0] + "/" + parts[1], nil
}

// maxCPUID bounds the CPU numbers a list may name.
const maxCPUID = 1 << 20

// cpuListSize counts the CPUs of a list in kernel format ("0-3,8"; empty means none) without
// expanding it, so that a malformed range like "0-4000000000" cannot cost time or memory.
// Overlapping or unordered ranges count each CPU once.
func cpuListSize(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	var ranges [][2]int
	sorted := true
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("%q is not a CPU number", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("%q is not a CPU number", hi)
			}
		}
		if a < 0 || b > maxCPUID {
			return 0, fmt.Errorf("CPU numbers must lie in 0..%d, got %q", maxCPUID, part)
		}
		if a > b {
			return 0, fmt.Errorf("invalid range %q (%d > %d)", part, a, b)
		}
		if n := len(ranges); n > 0 && a <= ranges[n-1][1] {
			sorted = false
		}
		ranges = append(ranges, [2]int{a, b})
	}
	if !sorted {
		slices.SortFunc(ranges, func(x, y [2]int) int { return x[0] - y[0] })
	}
	count, end := 0, -1
	for _, r := range ranges {
		start := max(r[0], end+1)
		if r[1] >= start {
			count += r[1] - start + 1
			end = r[1]
		}
	}
	return count, nil
}
