package inspect

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Sources of a Pins view.
const (
	SourceAgent      = "agent"
	SourceCheckpoint = "checkpoint"
	SourceNRT        = "NodeResourceTopology"
)

// Pools of a container.
const (
	PoolExclusive = "exclusive"
	PoolShared    = "shared"
)

// Pins is who holds which CPUs on one node: the JSON form of /pins and of `nodeagent pins -o
// json`, a public contract (docs/interfaces.md). CPU lists are in kernel list format.
type Pins struct {
	Node string `json:"node,omitempty"`
	// Source says where the view comes from: agent, checkpoint or NodeResourceTopology.
	Source     string `json:"source"`
	Generation uint64 `json:"generation"`
	// Fingerprint and UpdatedAt come with a NodeResourceTopology: its pods fingerprint, and when
	// the node agent last changed it.
	Fingerprint string     `json:"fingerprint,omitempty"`
	UpdatedAt   *time.Time `json:"updatedAt,omitempty"`
	// SharedCPUs is the shared pool; ReservedCPUs the CPUs kept for the kubelet and system
	// daemons (unknown in a NodeResourceTopology).
	SharedCPUs   string     `json:"sharedCPUs"`
	ReservedCPUs string     `json:"reservedCPUs,omitempty"`
	NUMANodes    []NUMANode `json:"numaNodes"`
	// Containers lists the exclusive pins, then the containers known to run in the shared pool.
	Containers []Container `json:"containers"`
	// Published is what the agent last published (agent views only).
	Published *report.Status `json:"published,omitempty"`
	// Paths are how the agent learns of new containers, fastest first: nri (pinned at creation),
	// inotify, informer, scan (agent views only).
	Paths []string `json:"paths,omitempty"`
}

// NUMANode is one NUMA node's CPU counts.
type NUMANode struct {
	ID          int    `json:"id"`
	Capacity    int    `json:"capacity"`
	Allocatable int    `json:"allocatable"`
	FreeCPUs    string `json:"freeCPUs"`
	Free        int    `json:"free"`
	// FreeCores counts free whole physical cores (absent from NodeResourceTopology views).
	FreeCores *int `json:"freeCores,omitempty"`
	// Available is what one exclusive request could get there now.
	Available int `json:"available"`
}

// Container is one container and the CPUs it may run on.
type Container struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	PodUID    string `json:"podUID,omitempty"`
	Container string `json:"container"`
	Pool      string `json:"pool"`
	CPUs      string `json:"cpus"`
	// Mems and NUMANode are set for exclusive pins.
	Mems     string `json:"mems,omitempty"`
	NUMANode *int   `json:"numaNode,omitempty"`
}

// PodLabel names the container's pod for people: namespace/name, or the UID when the name is
// unknown.
func (c Container) PodLabel() string {
	if c.Namespace != "" && c.Pod != "" {
		return c.Namespace + "/" + c.Pod
	}
	if c.PodUID != "" {
		return "pod " + c.PodUID
	}
	return c.Namespace + "/" + c.Pod
}

// FromSnapshot builds the view of an agent's (or a checkpoint's) state.
func FromSnapshot(node, source string, s report.Snapshot, opts report.Options) Pins {
	v := Pins{
		Node: node, Source: source, Generation: s.Generation,
		SharedCPUs: s.Shared.String(), ReservedCPUs: s.Reserved.String(),
		NUMANodes:  make([]NUMANode, 0, len(s.Free)),
		Containers: make([]Container, 0, len(s.Pins)+len(s.SharedContainers)),
	}
	for _, f := range s.Free {
		if f.Capacity == 0 {
			continue
		}
		cores := f.FreeWholeCores
		v.NUMANodes = append(v.NUMANodes, NUMANode{
			ID: int(f.NUMANode), Capacity: f.Capacity, Allocatable: f.Allocatable,
			FreeCPUs: f.FreeCPUs.String(), Free: f.FreeCPUs.Size(), FreeCores: &cores, Available: opts.Available(f),
		})
	}
	for _, p := range s.Pins {
		node := int(p.NUMANode)
		v.Containers = append(v.Containers, Container{
			Namespace: p.Namespace, Pod: p.Pod, PodUID: p.PodUID, Container: p.Container,
			Pool: PoolExclusive, CPUs: p.CPUs.String(), Mems: p.Mems.String(), NUMANode: &node,
		})
	}
	for _, c := range s.SharedContainers {
		v.Containers = append(v.Containers, Container{
			Namespace: c.Namespace, Pod: c.Pod, PodUID: c.PodUID, Container: c.Container,
			Pool: PoolShared, CPUs: v.SharedCPUs,
		})
	}
	return v
}

// FromNRT builds the view of a published NodeResourceTopology whose CPU lists may name at most
// bound CPUs together (nrt.MaxCPUs of its Node; cpulist.MaxCPUs when the Node is not known). It
// fails, naming the object and the field, when the object is not one a finegrain node agent wrote
// (a zone without the free-cpus attribute, a malformed CPU list or pins entry, lists naming more
// CPUs than bound), without ever building more than bound CPUs.
func FromNRT(o *nrt.NodeResourceTopology, bound int) (Pins, error) {
	v := Pins{Node: o.Name, Source: SourceNRT, NUMANodes: []NUMANode{}, Containers: []Container{}}
	capacity := bound
	fail := func(format string, args ...any) (Pins, error) {
		return Pins{}, fmt.Errorf("NodeResourceTopology %s: %s", o.Name, fmt.Sprintf(format, args...))
	}
	if g, ok := nrt.AttributeValue(o.Attributes, nrt.AttrGeneration); ok {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return fail("attribute %s=%q is not a generation number", nrt.AttrGeneration, g)
		}
		v.Generation = n
	}
	v.Fingerprint, _ = nrt.AttributeValue(o.Attributes, nrt.AttrPodsFingerprint)
	v.SharedCPUs, _ = nrt.AttributeValue(o.Attributes, nrt.AttrSharedCPUs)
	for _, mf := range o.ManagedFields {
		if mf.Manager == report.FieldManager && mf.Time != nil {
			t := mf.Time.Time
			v.UpdatedAt = &t
		}
	}
	for i := range o.Zones {
		z := &o.Zones[i]
		if z.Type != nrt.ZoneTypeNode {
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(z.Name, nrt.ZonePrefix))
		if err != nil || !strings.HasPrefix(z.Name, nrt.ZonePrefix) || id < 0 {
			return fail("zone %q is not named %s<NUMA node>", z.Name, nrt.ZonePrefix)
		}
		freeText, ok := nrt.AttributeValue(z.Attributes, nrt.AttrFreeCPUs)
		if !ok {
			return fail("zone %s has no %s attribute; a finegrain node agent did not write it", z.Name, nrt.AttrFreeCPUs)
		}
		free, err := cpulist.ParseWithin(freeText, bound)
		if tm := (*cpulist.TooManyError)(nil); errors.As(err, &tm) {
			return fail("zone %s attribute %s: the free-cpus and pins lists name more than the node's %d CPUs", z.Name, nrt.AttrFreeCPUs, capacity)
		}
		if err != nil {
			return fail("zone %s attribute %s=%q is not a CPU list: %v", z.Name, nrt.AttrFreeCPUs, freeText, err)
		}
		bound -= free.Size()
		n := NUMANode{ID: id, FreeCPUs: free.String(), Free: free.Size()}
		if cpu, ok := nrt.ZoneResource(z, nrt.ResourceCPU); ok {
			n.Capacity, n.Allocatable, n.Available = int(cpu.Capacity.Value()), int(cpu.Allocatable.Value()), int(cpu.Available.Value())
		}
		if n.Capacity > 0 {
			v.NUMANodes = append(v.NUMANodes, n)
		}
		pinsText, _ := nrt.AttributeValue(z.Attributes, nrt.AttrPins)
		pins, err := nrt.ParsePinsWithin(pinsText, bound)
		if err != nil {
			return fail("zone %s attribute %s: %v", z.Name, nrt.AttrPins, err)
		}
		for _, p := range pins {
			bound -= p.CPUs.Size()
			node := id
			c := Container{
				Namespace: p.Namespace, Pod: p.Pod, Container: p.Container,
				Pool: PoolExclusive, CPUs: p.CPUs.String(), Mems: strconv.Itoa(id), NUMANode: &node,
			}
			if p.Namespace == report.UnknownNamespace {
				c.Namespace, c.Pod, c.PodUID = "", "", p.Pod
			}
			v.Containers = append(v.Containers, c)
		}
	}
	slices.SortStableFunc(v.NUMANodes, func(a, b NUMANode) int { return cmp.Compare(a.ID, b.ID) })
	return v, nil
}
