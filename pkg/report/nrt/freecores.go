package nrt

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// FreeCoreMap is what a placer reads of one NodeResourceTopology: the node-wide attributes and,
// per NUMA node zone, the free CPUs, the cpu and memory amounts and the pins. ReadFreeCoreMap
// fills it straight from the dynamic client's unstructured object.
type FreeCoreMap struct {
	// Fingerprint is AttrPodsFingerprint ("" when absent); Generation AttrGeneration (0 when
	// absent or malformed).
	Fingerprint string
	Generation  int64
	// ExclusiveAvailable and MinSharedCPUs are AttrExclusiveAvailable and AttrMinSharedCPUs;
	// the Has fields are false when an attribute is absent or malformed.
	ExclusiveAvailable, MinSharedCPUs       int
	HasExclusiveAvailable, HasMinSharedCPUs bool
	// Zones are the zones of type ZoneTypeNode, in the object's order.
	Zones []FreeZone
	// Problems name malformed optional attributes, each then taken as absent, in the form
	// "attribute NAME=VALUE is not ...".
	Problems []string
}

// FreeZone is one NUMA node's zone.
type FreeZone struct {
	// Name is the zone's name; NUMA the NUMA node ID it gives (ZonePrefix + ID).
	Name string
	NUMA int
	// FreeCPUs is AttrFreeCPUs as written (a checked cpulist list); Free its size.
	FreeCPUs string
	Free     int
	// Pins is AttrPins ("" when absent), read with ScanPins.
	Pins string
	// Pinned counts the CPUs its well-formed pins entries name.
	Pinned int
	// CPU and Memory are the zone's ResourceCPU and ResourceMemory amounts.
	CPU, Memory Amounts
}

// Amounts are a resource's amounts in a zone; each Has field says whether the field was given.
type Amounts struct {
	Available, Allocatable       int64
	HasAvailable, HasAllocatable bool
}

// ReadFreeCoreMap reads the free-core map of an object whose CPU lists may name at most bound
// CPUs together (MaxCPUs of its Node). It walks the unstructured object directly, looking up only
// the attributes it needs and never expanding a CPU list: a placer reads one of these for every
// node. An error means the object is not a free-core map a placer can use; it names the object,
// and the zone and field at fault. A map that names more CPUs than bound is such an error
// (wrapping a *cpulist.TooManyError), found after counting at most bound of them; a malformed
// pins entry is not (ScanPins tells it to whoever reads the pins).
func ReadFreeCoreMap(u *unstructured.Unstructured, bound int) (*FreeCoreMap, error) {
	name := u.GetName()
	m := &FreeCoreMap{}
	var generation, exclusive, minShared string
	var hasGeneration, hasExclusive, hasMinShared bool
	err := forAttributes(u.Object["attributes"], name, func() string { return "attributes" }, func(attr, value string) {
		switch attr {
		case AttrPodsFingerprint:
			m.Fingerprint = value
		case AttrGeneration:
			generation, hasGeneration = value, true
		case AttrExclusiveAvailable:
			exclusive, hasExclusive = value, true
		case AttrMinSharedCPUs:
			minShared, hasMinShared = value, true
		}
	})
	if err != nil {
		return nil, err
	}
	if hasGeneration {
		n, err := strconv.ParseInt(generation, 10, 64)
		if err != nil {
			m.Problems = append(m.Problems, fmt.Sprintf("attribute %s=%q is not an integer", AttrGeneration, generation))
		}
		m.Generation = n
	}
	m.MinSharedCPUs, m.HasMinSharedCPUs = m.cpuCount(AttrMinSharedCPUs, minShared, hasMinShared)
	m.ExclusiveAvailable, m.HasExclusiveAvailable = m.cpuCount(AttrExclusiveAvailable, exclusive, hasExclusive)
	if err := m.readZones(u.Object["zones"], name, bound); err != nil {
		return nil, err
	}
	return m, nil
}

// cpuCount reads an optional attribute holding a count of CPUs.
func (m *FreeCoreMap) cpuCount(attr, value string, present bool) (int, bool) {
	if !present {
		return 0, false
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		m.Problems = append(m.Problems, fmt.Sprintf("attribute %s=%q is not a count of CPUs; taken as absent", attr, value))
		return 0, false
	}
	return n, true
}

// readZones reads the zones of type ZoneTypeNode; there must be at least one, each NUMA node once,
// and their free-cpus and pins lists may name at most bound CPUs together.
func (m *FreeCoreMap) readZones(v any, object string, bound int) error {
	capacity := bound
	zones, ok := v.([]any)
	if !ok && v != nil {
		return shapeError(object, "zones", "is not a list")
	}
	m.Zones = make([]FreeZone, 0, len(zones))
	for i, item := range zones {
		z, ok := item.(map[string]any)
		if !ok {
			return shapeError(object, fmt.Sprintf("zones[%d]", i), "is not an object")
		}
		if typ, _ := z["type"].(string); typ != ZoneTypeNode {
			continue
		}
		zone, err := readZone(z, object, i, bound, capacity)
		if err != nil {
			zname, _ := z["name"].(string)
			return fmt.Errorf("NodeResourceTopology %s zone %q: %w", object, zname, err)
		}
		bound -= zone.Free + zone.Pinned
		for j := range m.Zones {
			if m.Zones[j].NUMA == zone.NUMA {
				return fmt.Errorf("NodeResourceTopology %s lists NUMA node %d twice", object, zone.NUMA)
			}
		}
		m.Zones = append(m.Zones, zone)
	}
	if len(m.Zones) == 0 {
		return fmt.Errorf("NodeResourceTopology %s has no zone of type %s", object, ZoneTypeNode)
	}
	return nil
}

// readZone reads one NUMA node's zone, zones[index], whose lists may name at most bound of the
// node's capacity of CPUs. Paths in errors are built only when needed: reading a well-formed object
// allocates only its Zones.
func readZone(z map[string]any, object string, index, bound, capacity int) (FreeZone, error) {
	zname, _ := z["name"].(string)
	idText, ok := strings.CutPrefix(zname, ZonePrefix)
	id, err := strconv.Atoi(idText)
	if !ok || err != nil || id < 0 {
		return FreeZone{}, fmt.Errorf("zone name must be %s<NUMA id>", ZonePrefix)
	}
	zone := FreeZone{Name: zname, NUMA: id}
	var hasFree bool
	err = forAttributes(z["attributes"], object, func() string { return fmt.Sprintf("zones[%d].attributes", index) }, func(attr, value string) {
		switch attr {
		case AttrFreeCPUs:
			zone.FreeCPUs, hasFree = value, true
		case AttrPins:
			zone.Pins = value
		}
	})
	if err != nil {
		return FreeZone{}, err
	}
	if !hasFree {
		return FreeZone{}, fmt.Errorf("no %s attribute: the node agent has not published a free-core map", AttrFreeCPUs)
	}
	if zone.Free, err = cpulist.CountWithin(zone.FreeCPUs, bound); err != nil {
		if tooMany(err) {
			return FreeZone{}, &OversizedError{Attr: AttrFreeCPUs, Max: capacity}
		}
		return FreeZone{}, fmt.Errorf("attribute %s=%q is not a CPU list: %w", AttrFreeCPUs, zone.FreeCPUs, err)
	}
	for e, err := range ScanPinsWithin(zone.Pins, bound-zone.Free) {
		if err != nil && tooMany(err) {
			return FreeZone{}, &OversizedError{Attr: AttrPins, Max: capacity}
		}
		zone.Pinned += e.Count
	}
	if err := zone.readResources(z["resources"], object, index); err != nil {
		return FreeZone{}, err
	}
	return zone, nil
}

// OversizedError says that the CPU lists of a map name more CPUs than its node has; Attr is the
// attribute where the count went past Max. It wraps a *cpulist.TooManyError.
type OversizedError struct {
	Attr string
	Max  int
}

func (e *OversizedError) Error() string {
	return fmt.Sprintf("attribute %s: the map's free-cpus and pins lists name more than the node's %d CPUs; the map is not used until the node agent publishes a sound one", e.Attr, e.Max)
}

func (e *OversizedError) Unwrap() error { return &cpulist.TooManyError{Max: e.Max} }

// readResources reads the cpu and memory amounts of zones[index].resources.
func (zone *FreeZone) readResources(v any, object string, index int) error {
	resources, ok := v.([]any)
	if !ok && v != nil {
		return shapeError(object, fmt.Sprintf("zones[%d].resources", index), "is not a list")
	}
	for i, item := range resources {
		path := func() string { return fmt.Sprintf("zones[%d].resources[%d]", index, i) }
		r, ok := item.(map[string]any)
		if !ok {
			return shapeError(object, path(), "is not an object")
		}
		var into *Amounts
		switch rname, _ := r["name"].(string); rname {
		case ResourceCPU:
			into = &zone.CPU
		case ResourceMemory:
			into = &zone.Memory
		default:
			continue
		}
		var err error
		if into.Available, into.HasAvailable, err = amount(r, "available", object, path); err != nil {
			return err
		}
		if into.Allocatable, into.HasAllocatable, err = amount(r, "allocatable", object, path); err != nil {
			return err
		}
	}
	return nil
}

// amount reads one optional quantity field of a resource.
func amount(r map[string]any, field, object string, path func() string) (int64, bool, error) {
	v, ok := r[field]
	if !ok || v == nil {
		return 0, false, nil
	}
	var n int64
	switch x := v.(type) {
	case string:
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0, false, shapeError(object, path()+"."+field, "is not a quantity: "+err.Error())
		}
		n = q.Value()
	case int64:
		n = x
	case float64:
		n = int64(x)
	default:
		return 0, false, shapeError(object, path()+"."+field, fmt.Sprintf("is not a quantity: %v is neither a string nor a number", v))
	}
	return n, true, nil
}

// forAttributes calls fn for each {name, value} pair of an attribute list, later pairs after
// earlier ones; a list of another shape is an error.
func forAttributes(v any, object string, path func() string, fn func(name, value string)) error {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return shapeError(object, path(), "is not a list")
	}
	for i, item := range list {
		m, ok := item.(map[string]any)
		name, nok := m["name"].(string)
		value, vok := m["value"].(string)
		if !ok || !nok || !vok {
			return shapeError(object, fmt.Sprintf("%s[%d]", path(), i), "is not a {name, value} pair of strings")
		}
		fn(name, value)
	}
	return nil
}

// shapeError says an object does not have the NodeResourceTopology shape at a path.
func shapeError(object, path, what string) error {
	return fmt.Errorf("NodeResourceTopology %s does not have the %s/%s shape: %s %s", object, Group, Version, path, what)
}
