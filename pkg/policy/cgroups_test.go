package policy

import (
	"slices"
	"testing"
)

// The cgroups of a two-NUMA-node machine (twoNodesNoSMT: node 0 = 0-7, node 1 = 8-15) as the
// kubelet leaves them when the agent restarts without its checkpoint and without the API server.
func TestPinnedCgroups(t *testing.T) {
	topo := synthetic(t, twoNodesNoSMT)
	cg := func(cpus, mems string) CgroupCPUs {
		return CgroupCPUs{CPUs: mustParse(t, cpus), Mems: mustParse(t, mems)}
	}
	shared := cg("2-7,12-15", "0-1")
	for _, tc := range []struct {
		name string
		cgs  []CgroupCPUs
		want []bool
	}{
		{"two pins and the shared pool in a container and a sandbox",
			[]CgroupCPUs{cg("0-1", "0"), cg("8-11", "1"), shared, shared}, []bool{true, true, false, false}},
		{"shaped like a pin but inside the shared pool",
			[]CgroupCPUs{cg("2-3", "0"), shared}, []bool{false, false}},
		{"CPUs of two NUMA nodes", []CgroupCPUs{cg("6-9", "0"), shared}, []bool{false, false}},
		{"memory nodes that are not its CPUs' node", []CgroupCPUs{cg("0-1", "0-1"), cg("8-9", "0"), shared}, []bool{false, false, false}},
		{"an empty cpuset", []CgroupCPUs{cg("", ""), shared}, []bool{false, false}},
		{"next to a cgroup nobody pinned, which holds every CPU", []CgroupCPUs{cg("0-1", "0"), cg("0-15", "0-1")}, []bool{false, false}},
	} {
		if got := PinnedCgroups(topo, tc.cgs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: pinned = %v, want %v", tc.name, got, tc.want)
		}
	}
}
