package snapshot

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
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

// parseNRT reads one NodeResourceTopology (nrt.ReadFreeCoreMap) whose CPU lists may name at most
// bound CPUs (nrt.MaxCPUs of its Node) and applies the placer's rules to it. An error means the
// node cannot take pinned workers; it names the object and the field at fault.
func parseNRT(u *unstructured.Unstructured, bound int) (*nodeTopology, error) {
	m, err := nrt.ReadFreeCoreMap(u, bound)
	if err != nil {
		return nil, err
	}
	name := u.GetName()
	t := &nodeTopology{pinned: map[string]int{}, fingerprint: m.Fingerprint, generation: m.Generation, zones: make([]Zone, 0, len(m.Zones))}
	for _, p := range m.Problems {
		t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s: %s", name, p))
	}
	freeSum := 0
	for i := range m.Zones {
		fz := &m.Zones[i]
		freeSum += fz.Free
		t.zones = append(t.zones, zoneOf(fz))
		t.readPins(fz, name)
	}
	t.nodeWide(m, freeSum)
	return t, nil
}

// zoneOf is a zone's free resources: its free CPUs, fewer when the zone's cpu available says
// so, and its memory (-1 when not reported).
func zoneOf(fz *nrt.FreeZone) Zone {
	z := Zone{NUMA: fz.NUMA, FreeCPUs: fz.Free, FreeCPUList: fz.FreeCPUs, FreeMemory: -1, allocatableCPUs: fz.Free}
	if fz.CPU.HasAvailable {
		z.FreeCPUs = min(z.FreeCPUs, int(max(fz.CPU.Available, 0)))
	}
	if fz.CPU.HasAllocatable {
		z.allocatableCPUs = int(min(max(fz.CPU.Allocatable, 0), cpulist.MaxID+1))
	}
	if fz.Memory.HasAvailable {
		z.FreeMemory = max(fz.Memory.Available, 0)
	}
	if fz.Memory.HasAllocatable {
		z.allocatableMemory = max(fz.Memory.Allocatable, 0)
	}
	return z
}

// readPins records which pods a zone lists in its pins. A malformed entry is skipped with a
// warning: its pod's cores stay held as assumed, which is safe, while the other entries count.
func (t *nodeTopology) readPins(fz *nrt.FreeZone, object string) {
	for e, err := range nrt.ScanPins(fz.Pins) {
		if err != nil {
			t.warnings = append(t.warnings, fmt.Sprintf("NodeResourceTopology %s zone %s: pins entry %q ignored (%v); its pod's cores are held as assumed",
				object, fz.Name, e.Text, err))
			continue
		}
		t.pinned[e.PodKey()] = fz.NUMA
	}
}

// nodeWide sets what pinned pods can take on the whole node. An agent that does not publish it
// (an older one) is taken to keep a shared pool of one CPU, the least any agent keeps.
func (t *nodeTopology) nodeWide(m *nrt.FreeCoreMap, freeSum int) {
	minShared := m.MinSharedCPUs
	if !m.HasMinSharedCPUs || minShared < 1 {
		minShared = 1
	}
	allocatable := 0
	for _, z := range t.zones {
		allocatable += z.allocatableCPUs
	}
	t.capacity = max(allocatable-minShared, 0)
	if m.HasExclusiveAvailable {
		t.exclusive = m.ExclusiveAvailable
	} else {
		t.exclusive = max(freeSum-minShared, 0)
	}
}
