package topology

import "fmt"

// Shape describes a regular machine: every socket has the same number of NUMA nodes, every NUMA
// node the same number of L3 groups, and so on. Benchmarks, the simulator and tests use it to
// build hosts of any size without a sysfs tree.
type Shape struct {
	Sockets        int
	NUMAPerSocket  int
	L3PerNUMA      int
	CoresPerL3     int
	ThreadsPerCore int
	// MemoryPerNUMA is each node's memory in bytes.
	MemoryPerNUMA uint64
}

// Synthetic builds the Topology of a regular machine numbered the way Linux numbers Intel and AMD
// servers: first thread of every core in core order, then the second thread of every core, so
// core i holds CPUs i, i+cores, ... NUMA distances are 10 local, 12 within a socket, 21 across
// sockets.
func Synthetic(s Shape) (*Topology, error) {
	if s.Sockets < 1 || s.NUMAPerSocket < 1 || s.L3PerNUMA < 1 || s.CoresPerL3 < 1 || s.ThreadsPerCore < 1 {
		return nil, fmt.Errorf("synthetic shape %+v: every count must be at least 1", s)
	}
	numNodes := s.Sockets * s.NUMAPerSocket
	coresPerNode := s.L3PerNUMA * s.CoresPerL3
	cores := numNodes * coresPerNode
	spec := Spec{}
	for n := 0; n < numNodes; n++ {
		d := make([]int, numNodes)
		for m := range d {
			switch {
			case m == n:
				d[m] = 10
			case m/s.NUMAPerSocket == n/s.NUMAPerSocket:
				d[m] = 12
			default:
				d[m] = 21
			}
		}
		spec.NUMANodes = append(spec.NUMANodes, NUMANodeSpec{ID: NUMAID(n), MemoryBytes: s.MemoryPerNUMA, Distances: d})
	}
	for th := 0; th < s.ThreadsPerCore; th++ {
		for c := 0; c < cores; c++ {
			node := c / coresPerNode
			spec.CPUs = append(spec.CPUs, CPUSpec{
				ID:           th*cores + c,
				Socket:       SocketID(node / s.NUMAPerSocket),
				KernelCoreID: c % (coresPerNode * s.NUMAPerSocket),
				NUMANode:     NUMAID(node),
				L3:           c / s.CoresPerL3,
			})
		}
	}
	return New(spec)
}
