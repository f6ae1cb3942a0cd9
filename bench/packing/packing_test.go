package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

func synthetic(t *testing.T, s topology.Shape) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(s)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestKubeletModelFollowsDocumentedOrder checks the model on a small SMT machine (2 nodes × 4
// cores × 2 threads, core i = CPUs {i, i+8}).
func TestKubeletModelFollowsDocumentedOrder(t *testing.T) {
	topo := synthetic(t, topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	k := newKubeletPacker(topo, nil, 1, false)
	for _, tc := range []struct {
		id, n int
		want  string
	}{
		{0, 3, "[0 8 1]"}, // a whole core, then one thread of the next core in order
		{1, 1, "[9]"},     // the partly used core fills before a free core is split
		{2, 4, "[2 10 3 11]"},
	} {
		cpus, ok := k.admit(tc.id, tc.n)
		if got := fmt.Sprint(cpus); !ok || got != tc.want {
			t.Errorf("admit %d CPUs = %s, %v; want %s", tc.n, got, ok, tc.want)
		}
	}
	// Node 0 is full: the next request goes to node 1.
	if cpus, ok := k.admit(3, 2); !ok || fmt.Sprint(cpus) != "[4 12]" {
		t.Errorf("admit on the second node = %v, %v; want [4 12]", cpus, ok)
	}
	k.release(0)
	if cpus, ok := k.admit(4, 2); !ok || fmt.Sprint(cpus) != "[0 8]" {
		t.Errorf("admit after release = %v, %v; want the freed core [0 8]", cpus, ok)
	}
	if _, ok := newKubeletPacker(topo, nil, 1, true).admit(0, 3); ok {
		t.Error("full-pcpus-only model admitted an odd request on an SMT machine")
	}
}

// TestFirstFitAgainstBestFit shows the placement choice where the rules differ most: the kubelet
// takes the lowest NUMA node that fits, finegrain the partly used one, which keeps a whole node
// free for a later large request.
func TestFirstFitAgainstBestFit(t *testing.T) {
	topo := synthetic(t, topology.Shape{Sockets: 1, NUMAPerSocket: 2, L3PerNUMA: 1, CoresPerL3: 8, ThreadsPerCore: 1})
	a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		p           packer
		third, last string
	}{
		{"finegrain", &finegrainPacker{a: a}, "[12 13 14]", "[0 1 2 3 4 5 6 7] true"},
		{"kubelet", newKubeletPacker(topo, nil, 1, false), "[0 1 2]", "[] false"},
	} {
		tc.p.admit(0, 6) // node 0
		tc.p.admit(1, 4) // node 1
		tc.p.release(0)
		if cpus, _ := tc.p.admit(2, 3); fmt.Sprint(cpus) != tc.third {
			t.Errorf("%s: request of 3 got %v, want %s", tc.name, cpus, tc.third)
		}
		if cpus, ok := tc.p.admit(3, 8); fmt.Sprint(cpus, ok) != tc.last {
			t.Errorf("%s: request of 8 got %v %v, want %s", tc.name, cpus, ok, tc.last)
		}
	}
}

// wholeChecker fails the test when a packer hands out part of a core.
type wholeChecker struct {
	packer
	t    *testing.T
	topo *topology.Topology
}

func (w wholeChecker) admit(id, n int) ([]int, bool) {
	cpus, ok := w.packer.admit(id, n)
	if ok {
		got := map[int]bool{}
		for _, c := range cpus {
			got[c] = true
		}
		for _, c := range cpus {
			for _, s := range w.topo.Siblings(c).List() {
				if !got[s] {
					w.t.Fatalf("request %d got %v, which splits the core of CPU %d", id, cpus, c)
				}
			}
		}
	}
	return cpus, ok
}

func TestWholeCoreStreamsKeepCoresWhole(t *testing.T) {
	topo := synthetic(t, topology.Shape{Sockets: 2, NUMAPerSocket: 2, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2})
	reserved := topo.Siblings(0)
	stream := makeStream(streamSpec{seed: 1, arrivals: 500, maxSize: 14, unit: 2, load: 1.5, capacity: topo.NumCPUs() - 2})
	a, err := policy.New(topo, policy.Config{ReservedCPUs: reserved, MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]packer{
		"finegrain": &finegrainPacker{a: a},
		"kubelet":   newKubeletPacker(topo, reserved.List(), 1, true),
	} {
		st, err := run(wholeChecker{p, t, topo}, topo, stream, topo.NumCPUs()-2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.offered != 500 || st.admitted == 0 || st.admitted == 500 {
			t.Errorf("%s: admitted %d of %d; the stream should overload the machine", name, st.admitted, st.offered)
		}
	}
}

func TestMakeStreamIsSeededAndBounded(t *testing.T) {
	spec := streamSpec{seed: 4, arrivals: 1000, maxSize: 18, unit: 2, load: 1.5, capacity: 34}
	s1, s2 := makeStream(spec), makeStream(spec)
	if fmt.Sprint(s1) != fmt.Sprint(s2) {
		t.Fatal("the same seed gave two streams")
	}
	for i, a := range s1 {
		if a.size < 2 || a.size > 18 || a.size%2 != 0 || a.life < 1 {
			t.Fatalf("arrival %d = %+v, want an even size in 2..18 and a positive life", i, a)
		}
	}
}

// TestComparisonTable runs the comparison on every machine with short streams and checks the
// claims the report makes: best fit refuses fewer requests while the machine has room, and
// splits fewer grants over L3 groups, than the kubelet's first fit.
func TestComparisonTable(t *testing.T) {
	o := options{seeds: 3, arrivals: 1000, load: 1.5, fixtures: filepath.Join("..", "..", "pkg", "topology", "testdata")}
	ms, err := machines(o.fixtures)
	if err != nil {
		t.Fatal(err)
	}
	var rows []result
	for _, m := range ms {
		r, err := compareOn(m, m.topo.ThreadsPerCore() > 1, o)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if r.finegrain.refusedWithRoom > r.kubelet.refusedWithRoom || r.finegrain.l3Extra > r.kubelet.l3Extra {
			t.Errorf("%s: finegrain refused %d with room and split %d grants over L3 groups; kubelet %d and %d",
				m.name, r.finegrain.refusedWithRoom, r.finegrain.l3Extra, r.kubelet.refusedWithRoom, r.kubelet.l3Extra)
		}
		rows = append(rows, r)
	}
	var out bytes.Buffer
	if err := writeTable(&out, rows, o); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n| "); lines != len(ms)+1 {
		t.Errorf("table has %d rows, want a header and one per machine:\n%s", lines, out.String())
	}
}
