package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// step is one request in a table test and the CPUs it must get ("" when it must fail).
type step struct {
	name  string
	cpus  int
	numa  NUMAChoice
	split bool
	want  string
	mems  string
}

func runSteps(t *testing.T, a *Allocator, steps []step) {
	t.Helper()
	for _, s := range steps {
		asg, err := a.Allocate(Request{Key: key(s.name), CPUs: s.cpus, NUMANode: s.numa, AllowSplitCores: s.split})
		if err != nil {
			t.Fatalf("%s: allocate %d: %v", s.name, s.cpus, err)
		}
		if got := asg.CPUs.String(); got != s.want {
			t.Errorf("%s: cpus = %s, want %s", s.name, got, s.want)
		}
		if s.mems != "" && asg.Mems.String() != s.mems {
			t.Errorf("%s: mems = %s, want %s", s.name, asg.Mems, s.mems)
		}
		if err := a.Verify(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

func TestNewRejectsUnworkableConfig(t *testing.T) {
	topo := synthetic(t, twoNodesNoSMT)
	for _, tc := range []struct {
		reserved  string
		minShared int
		want      string
	}{
		{"", 0, "too small"},
		{"15-16", 1, "not online"},
		{"0-14", 2, "fewer than the shared pool's minimum"},
	} {
		_, err := New(topo, Config{ReservedCPUs: mustParse(t, tc.reserved), MinSharedCPUs: tc.minShared})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reserved %q min %d: error %v, want one containing %q", tc.reserved, tc.minShared, err, tc.want)
		}
	}
}

func TestAllocateIssueExample(t *testing.T) {
	a := newAllocator(t, synthetic(t, paperNode), "", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 4, want: "0-3", mems: "0"},
		{name: "b", cpus: 8, numa: OnNUMANode(1), want: "18-25", mems: "1"},
	})
	if got, want := a.SharedCPUs().String(), "4-17,26-35"; got != want {
		t.Errorf("shared = %s, want %s", got, want)
	}
	// Both nodes are partly used; the fuller one that fits is filled first.
	runSteps(t, a, []step{{name: "c", cpus: 10, want: "26-35", mems: "1"}})
	if _, ok := a.Release(key("a")); !ok {
		t.Fatal("release a: not found")
	}
	if got, want := a.SharedCPUs().String(), "0-17"; got != want {
		t.Errorf("shared after release = %s, want %s", got, want)
	}
	if _, ok := a.Release(key("a")); ok {
		t.Error("second release of a reported success")
	}
}

func TestSMTSiblingsStayTogether(t *testing.T) {
	a := newAllocator(t, synthetic(t, dualSocketHT), "", 1)
	runSteps(t, a, []step{
		{name: "even", cpus: 4, want: "0-1,8-9"},
	})
	_, err := a.Allocate(req("odd", 3))
	var smt *SMTAlignmentError
	if !errors.As(err, &smt) || smt.Requested != 3 || smt.CPUsPerCore != 2 {
		t.Fatalf("odd request without splitting: error %v, want SMTAlignmentError{3, 2}", err)
	}
	runSteps(t, a, []step{
		// One whole core, then one thread of a free core on the same (partly used) node.
		{name: "odd", cpus: 3, split: true, want: "2-3,10"},
		// A single thread goes to the half-used core before any free core is split.
		{name: "one", cpus: 1, split: true, want: "11"},
		{name: "next", cpus: 2, want: "4,12", mems: "1"},
	})
}

func TestPartlyUsedNUMANodeFirst(t *testing.T) {
	a := newAllocator(t, synthetic(t, twoNodesNoSMT), "", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 2, want: "0-1"},
		{name: "b", cpus: 4, numa: OnNUMANode(1), want: "8-11"},
		{name: "c", cpus: 3, want: "12-14"}, // node 1 has 4 free, node 0 has 6: the fuller fits
		{name: "d", cpus: 5, want: "2-6"},
	})
	_, err := a.Allocate(req("e", 2))
	var nofit *NoFitError
	if !errors.As(err, &nofit) {
		t.Fatalf("request for 2 CPUs with 1 free per node: error %v, want NoFitError", err)
	}
	got := []string{}
	for _, f := range nofit.Free {
		got = append(got, f.FreeCPUs.String())
	}
	if diff := cmp.Diff([]string{"7", "15"}, got); diff != "" {
		t.Errorf("NoFitError free CPUs (-want +got):\n%s", diff)
	}
	for _, want := range []string{"no single NUMA node has 2 free CPUs", "node 0: 1 free CPUs [7]", "node 1: 1 free CPUs [15]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestEmptyNodeWaitsEvenWhenFuller(t *testing.T) {
	// Node 1 keeps only CPUs 14-15 after reservation; it is fuller than node 0 but, once empty,
	// a partly used node 0 is still filled first.
	a := newAllocator(t, synthetic(t, twoNodesNoSMT), "8-13", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 1, want: "14"}, // both empty: the fuller node 1
		{name: "b", cpus: 2, want: "0-1"},
		{name: "c", cpus: 1, want: "15"},
	})
	a.Release(key("a"))
	a.Release(key("c"))
	runSteps(t, a, []step{{name: "d", cpus: 2, want: "2-3"}})
}

func TestL3GroupsStayTogether(t *testing.T) {
	a := newAllocator(t, synthetic(t, epycLike), "", 1)
	runSteps(t, a, []step{
		{name: "a", cpus: 4, want: "0-1,16-17"},
		// Three cores do not fit the partly used group 0 (two left): the empty group 1 of the
		// same partly used node takes them.
		{name: "b", cpus: 6, want: "4-6,20-22"},
		// Two cores fit both group 0 (2 left) and not group 1 (1 left): best fit.
		{name: "c", cpus: 4, want: "2-3,18-19"},
		{name: "d", cpus: 2, want: "7,23"},
		// Five cores exceed a group: the group with most free cores whole, then best fit.
		{name: "e", cpus: 10, want: "8-12,24-28", mems: "1"},
	})
}

func TestL3LocalityBeforeFullestNode(t *testing.T) {
	a := newAllocator(t, synthetic(t, epycLike), "", 1)
	for name, cpus := range map[string]string{
		"x0": "0-1,16-17", "x1": "4-5,20-21", // node 0: two free cores in each group
		"y0": "8-9,24-25", "y1": "12,28", // node 1: two free in group 2, three in group 3
	} {
		node := 0
		if name[0] == 'y' {
			node = 1
		}
		if err := a.Restore(Assignment{Key: key(name), CPUs: mustParse(t, cpus), NUMANode: topology.NUMAID(node)}); err != nil {
			t.Fatal(err)
		}
	}
	// Node 0 is fuller (4 free cores against 5) but would split the request across L3 groups.
	runSteps(t, a, []step{{name: "z", cpus: 6, want: "13-15,29-31"}})
}

func TestRequestErrors(t *testing.T) {
	a := newAllocator(t, synthetic(t, paperNode), "0-1", 2)
	mustAllocate(t, a, req("fill", 16)) // node 0 (fuller: 16 allocatable) is now full
	cases := []struct {
		name  string
		req   Request
		check func(error) bool
		text  string
	}{
		{"zero", Request{Key: key("z"), CPUs: 0}, is[*InvalidCountError], "asks for 0 CPUs"},
		{"negative", Request{Key: key("n"), CPUs: -2}, is[*InvalidCountError], "asks for -2 CPUs"},
		{"duplicate", req("fill", 1), is[*DuplicateError], "already holds exclusive CPUs 2-17"},
		{"larger than any node", req("big", 19), is[*TooLargeError], "any single NUMA node of this machine can give at most 18"},
		{"larger than the machine", req("huge", 100), is[*TooLargeError], "the machine has 36 online CPUs"},
		{"larger than the required node", Request{Key: key("r"), CPUs: 17, NUMANode: OnNUMANode(0)}, is[*TooLargeError], "NUMA node 0 can give at most 16"},
		{"unknown node", Request{Key: key("u"), CPUs: 1, NUMANode: OnNUMANode(4)}, is[*UnknownNUMANodeError], "NUMA node 4, which this machine does not have (nodes with CPUs: [0 1])"},
		{"required node full", Request{Key: key("f"), CPUs: 2, NUMANode: OnNUMANode(0)}, is[*NoFitError], "NUMA node 0 does not have 2 free CPUs"},
		{"shared minimum", req("s", 17), is[*NoFitError], "shrink the shared pool from 18 CPUs below its minimum of 2"},
	}
	before := a.SharedCPUs().String()
	for _, tc := range cases {
		_, err := a.Allocate(tc.req)
		if err == nil || !tc.check(err) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.text)
		}
		if _, werr := a.WouldFit(tc.req); tc.name != "duplicate" && (werr == nil || werr.Error() != err.Error()) {
			t.Errorf("%s: WouldFit error %v, Allocate error %v", tc.name, werr, err)
		}
	}
	if err := a.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := a.SharedCPUs().String(); got != before {
		t.Errorf("failed requests changed the shared pool from %s to %s", before, got)
	}
}

func is[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestMemoryOnlyNodeAndDegradedCore(t *testing.T) {
	topo := memoryOnlyAndDegraded(t)
	a := newAllocator(t, topo, "", 1)
	if _, err := a.Allocate(Request{Key: key("m"), CPUs: 2, NUMANode: OnNUMANode(1)}); !is[*MemoryOnlyNUMANodeError](err) {
		t.Errorf("request on memory-only node 1: error %v, want MemoryOnlyNUMANodeError", err)
	}
	// Core 3 lost its sibling: requests that keep whole cores never use it.
	runSteps(t, a, []step{{name: "whole", cpus: 6, want: "0-2,4-6"}})
	free := a.Free()
	if len(free) != 2 || free[0].FreeCPUs.String() != "3" || free[0].FreeWholeCores != 0 || free[1].Capacity != 0 || !free[1].FreeCPUs.IsEmpty() {
		t.Errorf("free = %+v, want node 0 with CPU 3 and no whole core, node 1 without CPUs", free)
	}

	b := newAllocator(t, topo, "", 1)
	// A single thread goes to the lone thread of core 3 before any whole core is split.
	runSteps(t, b, []step{{name: "one", cpus: 1, split: true, want: "3"}})
}

func TestFreeReportsAvailable(t *testing.T) {
	a := newAllocator(t, synthetic(t, dualSocketHT), "0", 3)
	mustAllocate(t, a, req("a", 4)) // node 0 (fuller) gets cores 1-2
	got := a.Free()
	type row struct {
		Node, Capacity, Allocatable int
		Free                        string
		Whole, Available, Aligned   int
	}
	rows := []row{}
	for _, f := range got {
		rows = append(rows, row{int(f.NUMANode), f.Capacity, f.Allocatable, f.FreeCPUs.String(), f.FreeWholeCores, f.Available, f.AvailableAligned})
	}
	// 11 CPUs are free in all; 8 may still be taken without shrinking the shared pool below 3.
	want := []row{
		{0, 8, 7, "3,8,11", 1, 3, 2},
		{1, 8, 8, "4-7,12-15", 4, 8, 8},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("free (-want +got):\n%s", diff)
	}
}
