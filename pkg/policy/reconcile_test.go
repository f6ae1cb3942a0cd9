package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// twoNodesCPU9Offline is twoNodesNoSMT after CPU 9 went offline.
func twoNodesCPU9Offline(t testing.TB) *topology.Topology {
	t.Helper()
	spec := topology.Spec{
		NUMANodes: []topology.NUMANodeSpec{{ID: 0, Distances: []int{10, 12}}, {ID: 1, Distances: []int{12, 10}}},
		Offline:   cpuset.New(9),
	}
	for cpu := 0; cpu < 16; cpu++ {
		if cpu != 9 {
			spec.CPUs = append(spec.CPUs, topology.CPUSpec{ID: cpu, KernelCoreID: cpu, NUMANode: topology.NUMAID(cpu / 8), L3: cpu / 8})
		}
	}
	topo, err := topology.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func observed(t testing.TB, name string, requested int, cpus, mems string) Observed {
	return Observed{Key: key(name), RequestedCPUs: requested, CPUs: mustParse(t, cpus), Mems: mustParse(t, mems)}
}

func TestReconcile(t *testing.T) {
	base := synthetic(t, twoNodesNoSMT)
	prior := newAllocator(t, base, "0", 1)
	mustAllocate(t, prior, req("a", 2))                                              // 1-2
	mustAllocate(t, prior, Request{Key: key("b"), CPUs: 3, NUMANode: OnNUMANode(1)}) // 8-10
	cp := prior.Checkpoint("node-a")
	both := []Observed{observed(t, "a", 2, "1-2", "0"), observed(t, "b", 3, "8-10", "1")}
	withEntries := func(entries ...Assignment) *Checkpoint {
		c := cp
		c.Assignments = entries
		return &c
	}
	entry := func(name, cpus string, node int) Assignment {
		return Assignment{Key: key(name), CPUs: mustParse(t, cpus), NUMANode: topology.NUMAID(node)}
	}
	foreign := cp
	foreign.Topology = "tfp1-0000000000000000"
	otherHost := cp
	otherHost.Host = "node-b"

	cases := []struct {
		name     string
		in       ReconcileInput
		repairs  []string // reason/action/container
		assigned map[string]string
	}{
		{
			name:     "clean restart",
			in:       ReconcileInput{Checkpoint: &cp, Observed: both},
			assigned: map[string]string{"a": "1-2", "b": "8-10"},
		},
		{
			name: "no checkpoint: keep valid cgroup pins, allocate the rest",
			in: ReconcileInput{Observed: []Observed{
				observed(t, "a", 2, "1-2", "0"), observed(t, "b", 3, "1-15", "0-1"), observed(t, "c", 4, "3-4", "0"),
			}},
			repairs:  []string{"CheckpointAbsent/rebuild-from-cgroups/", "AdoptedFromCgroup/adopt/a", "NotPinned/allocate/b", "NotPinned/allocate/c"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "no checkpoint and nothing pinned: first start",
			in:       ReconcileInput{},
			assigned: map[string]string{},
		},
		{
			name:     "unreadable checkpoint",
			in:       ReconcileInput{CheckpointErr: fmt.Errorf("checkpoint payload does not match checksum: %w", ErrChecksum), Observed: both},
			repairs:  []string{"CheckpointUnreadable/rebuild-from-cgroups/", "AdoptedFromCgroup/adopt/a", "AdoptedFromCgroup/adopt/b"},
			assigned: map[string]string{"a": "1-2", "b": "8-10"},
		},
		{
			name:     "checkpoint of another machine",
			in:       ReconcileInput{Checkpoint: &foreign, Observed: both[:1]},
			repairs:  []string{"ForeignCheckpoint/rebuild-from-cgroups/", "AdoptedFromCgroup/adopt/a"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "checkpoint of another host",
			in:       ReconcileInput{Checkpoint: &otherHost, Observed: both[:1]},
			repairs:  []string{"ForeignCheckpoint/rebuild-from-cgroups/", "AdoptedFromCgroup/adopt/a"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "CPU went offline",
			in:       ReconcileInput{Topology: twoNodesCPU9Offline(t), Checkpoint: &cp, Observed: both},
			repairs:  []string{"CPUOffline/allocate/b"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "reserved CPU went offline",
			in:       ReconcileInput{Topology: twoNodesCPU9Offline(t), Config: Config{ReservedCPUs: cpuset.New(0, 9), MinSharedCPUs: 1}, Checkpoint: &cp, Observed: both[:1]},
			repairs:  []string{"ReservedOffline/use-config/", "ContainerGone/drop/b"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "reserved set grew over a pin",
			in:       ReconcileInput{Config: Config{ReservedCPUs: cpuset.New(0, 1), MinSharedCPUs: 1}, Checkpoint: &cp, Observed: both},
			repairs:  []string{"ReservedChanged/use-config/", "ReservedOverlap/allocate/a"},
			assigned: map[string]string{"b": "8-10"},
		},
		{
			name:     "container gone",
			in:       ReconcileInput{Checkpoint: &cp, Observed: both[1:]},
			repairs:  []string{"ContainerGone/drop/a"},
			assigned: map[string]string{"b": "8-10"},
		},
		{
			name:     "cgroup disagrees",
			in:       ReconcileInput{Checkpoint: &cp, Observed: []Observed{observed(t, "a", 2, "1-2", "0-1"), observed(t, "b", 3, "8-11", "1")}},
			repairs:  []string{"CgroupDisagrees/rewrite-cgroup/a", "CgroupDisagrees/rewrite-cgroup/b"},
			assigned: map[string]string{"a": "1-2", "b": "8-10"},
		},
		{
			name:     "request resized",
			in:       ReconcileInput{Checkpoint: &cp, Observed: []Observed{observed(t, "a", 4, "1-2", "0"), both[1]}},
			repairs:  []string{"SizeChanged/allocate/a"},
			assigned: map[string]string{"b": "8-10"},
		},
		{
			name: "overlapping and duplicate entries",
			in: ReconcileInput{
				Checkpoint: withEntries(entry("a", "1-2", 0), entry("a", "5", 0), entry("b", "2-4", 0), entry("c", "7-8", 0)),
				Observed:   []Observed{both[0], observed(t, "b", 3, "2-4", "0"), observed(t, "c", 2, "7-8", "0")},
			},
			repairs:  []string{"Duplicate/drop/a", "Overlap/allocate/b", "InvalidAssignment/allocate/c"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "shared pool minimum raised",
			in:       ReconcileInput{Config: Config{ReservedCPUs: cpuset.New(0), MinSharedCPUs: 12}, Checkpoint: &cp, Observed: both},
			repairs:  []string{"SharedMinimum/allocate/b"},
			assigned: map[string]string{"a": "1-2"},
		},
		{
			name:     "cgroup pins overlap",
			in:       ReconcileInput{Observed: []Observed{both[0], observed(t, "z", 2, "2-3", "0")}},
			repairs:  []string{"CheckpointAbsent/rebuild-from-cgroups/", "AdoptedFromCgroup/adopt/a", "Overlap/allocate/z"},
			assigned: map[string]string{"a": "1-2"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Topology == nil {
				in.Topology = base
			}
			if in.Config.MinSharedCPUs == 0 {
				in.Config = Config{ReservedCPUs: cpuset.New(0), MinSharedCPUs: 1}
			}
			in.Host = "node-a"
			a, repairs, err := Reconcile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, r := range repairs {
				got = append(got, fmt.Sprintf("%s/%s/%s", r.Reason, r.Action, r.Key.Container))
				if r.Detail == "" || !strings.Contains(r.String(), string(r.Reason)) {
					t.Errorf("repair %+v has no detail or a bad String %q", r, r)
				}
			}
			if diff := cmp.Diff(tc.repairs, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("repairs (-want +got):\n%s", diff)
			}
			assigned := map[string]string{}
			for _, asg := range a.Assignments() {
				assigned[asg.Key.Container] = asg.CPUs.String()
			}
			if diff := cmp.Diff(tc.assigned, assigned); diff != "" {
				t.Errorf("assignments (-want +got):\n%s", diff)
			}
			if err := a.Verify(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReconcileRefusesUnworkableConfig(t *testing.T) {
	_, _, err := Reconcile(ReconcileInput{Topology: synthetic(t, twoNodesNoSMT), Config: Config{MinSharedCPUs: 17}})
	if err == nil || !strings.Contains(err.Error(), "fewer than the shared pool's minimum") {
		t.Errorf("error %v, want the shared-pool minimum named", err)
	}
}

// TestReconcileAfterCorruptFile runs the decoder and Reconcile together, as the agent does.
func TestReconcileAfterCorruptFile(t *testing.T) {
	data, _ := sampleCheckpoint(t)
	data[len(data)/2] ^= 0x20
	_, derr := DecodeCheckpoint(data)
	if derr == nil {
		t.Fatal("corrupted checkpoint decoded")
	}
	a, repairs, err := Reconcile(ReconcileInput{
		Topology: synthetic(t, paperNode), Config: Config{ReservedCPUs: cpuset.New(0, 1), MinSharedCPUs: 1},
		CheckpointErr: derr, Observed: []Observed{observed(t, "b", 4, "2-5", "0")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(repairs) != 2 || repairs[0].Reason != ReasonCheckpointUnreadable || repairs[1].Reason != ReasonAdoptedFromCgroup ||
		!strings.Contains(repairs[0].Detail, "checkpoint") {
		t.Errorf("repairs = %v", repairs)
	}
	if got, ok := a.Lookup(key("b")); !ok || got.CPUs.String() != "2-5" {
		t.Errorf("b = %v, %v; want 2-5 adopted", got, ok)
	}
}
