package topology

import (
	"encoding/json"
	"fmt"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// View is the public JSON form of a Topology (`nodeagent topology -o json`). Scripts and other
// programs rely on its field names; add fields, never rename or remove one. Every CPU list is in
// kernel list format ("0-3,8", "" when empty); slices are ordered by ID.
type View struct {
	OnlineCPUs     string         `json:"onlineCPUs"`
	Sockets        []SocketView   `json:"sockets"`
	NUMANodes      []NUMANodeView `json:"numaNodes"`
	Cores          []CoreView     `json:"cores"`
	L3Groups       []L3GroupView  `json:"l3Groups"`
	IsolatedCPUs   string         `json:"isolatedCPUs"`
	OfflineCPUs    string         `json:"offlineCPUs"`
	ThreadsPerCore int            `json:"threadsPerCore"`
}

// SocketView is one socket (physical package).
type SocketView struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
	// NUMANodes are the IDs of the nodes holding the socket's CPUs.
	NUMANodes []int `json:"numaNodes"`
}

// NUMANodeView is one NUMA node; a memory-only node has "cpus": "".
type NUMANodeView struct {
	ID          int    `json:"id"`
	CPUs        string `json:"cpus"`
	MemoryBytes uint64 `json:"memoryBytes"`
	// Distances[i] is the distance to numaNodes[i].
	Distances []int `json:"distances"`
	// L3Groups are the IDs of the L3 groups whose CPUs lie in this node.
	L3Groups []int `json:"l3Groups"`
}

// CoreView is one physical core; ID is the machine-wide logical core number (lscpu's CORE column),
// CoreID the kernel's core_id.
type CoreView struct {
	ID       int    `json:"id"`
	Socket   int    `json:"socket"`
	NUMANode int    `json:"numaNode"`
	CPUs     string `json:"cpus"`
	CoreID   int    `json:"coreID"`
	Die      int    `json:"die"`
	// L3Group is the ID of the core's L3 group, or -1 when the host reports no L3 cache.
	L3Group int `json:"l3Group"`
}

// L3GroupView is one last-level cache and the CPUs sharing it.
type L3GroupView struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
	// NUMANode is the node holding the group's CPUs, or -1 when the group spans nodes.
	NUMANode  int    `json:"numaNode"`
	SizeBytes uint64 `json:"sizeBytes"`
}

// View returns the topology's public JSON form.
func (t *Topology) View() View {
	v := View{
		OnlineCPUs:     t.OnlineCPUs.String(),
		IsolatedCPUs:   t.IsolatedCPUs.String(),
		OfflineCPUs:    t.OfflineCPUs.String(),
		ThreadsPerCore: t.threadsPerCore,
		Sockets:        make([]SocketView, len(t.Sockets)),
		NUMANodes:      make([]NUMANodeView, len(t.NUMANodes)),
		Cores:          make([]CoreView, len(t.Cores)),
		L3Groups:       make([]L3GroupView, len(t.L3Groups)),
	}
	for i, s := range t.Sockets {
		v.Sockets[i] = SocketView{ID: int(s.ID), CPUs: s.CPUs.String(), NUMANodes: ints(s.NUMANodes)}
	}
	for i, n := range t.NUMANodes {
		v.NUMANodes[i] = NUMANodeView{ID: int(n.ID), CPUs: n.CPUs.String(), MemoryBytes: n.MemoryBytes, Distances: ints(n.distances), L3Groups: ints(n.L3Groups)}
	}
	for i, c := range t.Cores {
		v.Cores[i] = CoreView{ID: int(c.ID), Socket: int(c.Socket), NUMANode: int(c.NUMANode), CPUs: c.CPUs.String(), CoreID: c.KernelCoreID, Die: c.Die, L3Group: int(c.L3Group)}
	}
	for i, g := range t.L3Groups {
		v.L3Groups[i] = L3GroupView{ID: int(g.ID), CPUs: g.CPUs.String(), NUMANode: int(g.NUMANode), SizeBytes: g.SizeBytes}
	}
	return v
}

// ints copies IDs into the plain numbers of the JSON form (never nil).
func ints[T ~int](ids []T) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Topology rebuilds the Topology a View was made from, checking it like New does. Fields derived
// from others (socket and node CPU lists, L3 membership, threadsPerCore) are recomputed, and an
// error names any that disagree with what the view says.
func (v View) Topology() (*Topology, error) {
	spec := Spec{L3SizeBytes: map[int]uint64{}}
	var err error
	if spec.Offline, err = cpulist.Parse(v.OfflineCPUs); err != nil {
		return nil, fmt.Errorf("offlineCPUs %q: %w", v.OfflineCPUs, err)
	}
	if spec.Isolated, err = cpulist.Parse(v.IsolatedCPUs); err != nil {
		return nil, fmt.Errorf("isolatedCPUs %q: %w", v.IsolatedCPUs, err)
	}
	for i, n := range v.NUMANodes {
		if i > 0 && n.ID <= v.NUMANodes[i-1].ID {
			return nil, fmt.Errorf("numaNodes must be in ascending ID order (their distances follow it), but node %d follows node %d", n.ID, v.NUMANodes[i-1].ID)
		}
		spec.NUMANodes = append(spec.NUMANodes, NUMANodeSpec{ID: NUMAID(n.ID), MemoryBytes: n.MemoryBytes, Distances: n.Distances})
	}
	for _, g := range v.L3Groups {
		spec.L3SizeBytes[g.ID] = g.SizeBytes
	}
	for _, c := range v.Cores {
		cpus, err := cpulist.Parse(c.CPUs)
		if err != nil {
			return nil, fmt.Errorf("core %d cpus %q: %w", c.ID, c.CPUs, err)
		}
		for _, cpu := range cpus.List() {
			spec.CPUs = append(spec.CPUs, CPUSpec{ID: cpu, Socket: SocketID(c.Socket), Die: c.Die, KernelCoreID: c.CoreID, NUMANode: NUMAID(c.NUMANode), L3: c.L3Group})
		}
	}
	t, err := New(spec)
	if err != nil {
		return nil, err
	}
	if err := v.matches(t.View()); err != nil {
		return nil, err
	}
	return t, nil
}

// matches reports the first field of v that differs from the view got rebuilt from v's cores.
func (v View) matches(got View) error {
	check := func(what, want, have string) error {
		if want != have {
			return fmt.Errorf("%s is %q but the cores say %q", what, want, have)
		}
		return nil
	}
	if err := check("onlineCPUs", v.OnlineCPUs, got.OnlineCPUs); err != nil {
		return err
	}
	if v.ThreadsPerCore != got.ThreadsPerCore {
		return fmt.Errorf("threadsPerCore is %d but the cores say %d", v.ThreadsPerCore, got.ThreadsPerCore)
	}
	if len(v.Sockets) != len(got.Sockets) || len(v.L3Groups) != len(got.L3Groups) || len(v.Cores) != len(got.Cores) {
		return fmt.Errorf("view has %d sockets, %d cores and %d L3 groups but its cores make %d, %d and %d",
			len(v.Sockets), len(v.Cores), len(v.L3Groups), len(got.Sockets), len(got.Cores), len(got.L3Groups))
	}
	for i, s := range v.Sockets {
		if err := check(fmt.Sprintf("socket %d cpus", s.ID), s.CPUs, got.Sockets[i].CPUs); err != nil {
			return err
		}
	}
	for i, n := range v.NUMANodes {
		if err := check(fmt.Sprintf("NUMA node %d cpus", n.ID), n.CPUs, got.NUMANodes[i].CPUs); err != nil {
			return err
		}
	}
	for i, c := range v.Cores {
		if c.ID != got.Cores[i].ID || c.L3Group != got.Cores[i].L3Group {
			return fmt.Errorf("core %d (cpus %q) is out of order or in the wrong L3 group; cores are numbered by lowest CPU", c.ID, c.CPUs)
		}
	}
	for i, g := range v.L3Groups {
		if err := check(fmt.Sprintf("L3 group %d cpus", g.ID), g.CPUs, got.L3Groups[i].CPUs); err != nil {
			return err
		}
	}
	return nil
}

// MarshalJSON encodes the topology as its View.
func (t *Topology) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.View())
}

// UnmarshalJSON decodes a View and rebuilds the topology from it (see View.Topology).
func (t *Topology) UnmarshalJSON(data []byte) error {
	var v View
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("decode topology JSON: %w", err)
	}
	nt, err := v.Topology()
	if err != nil {
		return fmt.Errorf("topology JSON: %w", err)
	}
	*t = *nt
	return nil
}
