package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// twoSocketSMT is 2 sockets × 1 NUMA node × 4 cores × 2 threads: core i holds CPUs i and i+8,
// NUMA node 0 CPUs 0-3,8-11, node 1 CPUs 4-7,12-15, 64 GiB each.
func twoSocketSMT(t testing.TB) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 64 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

var testNode = NodeRef{Name: "node-a", UID: "6f1e5d2c-0000-4000-8000-00000000000a"}

var podNames = map[string][2]string{
	"uid-lammps": {"hpc", "lammps-worker-0"},
	"uid-stream": {"hpc", "stream-worker-1"},
}

func names(uid string) (string, string) { n := podNames[uid]; return n[0], n[1] }

// pinnedAllocator reserves core 0 (CPUs 0,8) and pins three containers through the real
// allocator: 2 CPUs anywhere (it picks core 1 of NUMA node 0), 4 CPUs and 2 CPUs on node 1
// (cores 4-5, then core 6).
func pinnedAllocator(t testing.TB, topo *topology.Topology) *policy.Allocator {
	t.Helper()
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0, 8), MinSharedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []policy.Request{
		{Key: policy.Key{PodUID: "uid-lammps", Container: "rank"}, CPUs: 2},
		{Key: policy.Key{PodUID: "uid-stream", Container: "rank"}, CPUs: 4, NUMANode: policy.OnNUMANode(1)},
		{Key: policy.Key{PodUID: "uid-unknown", Container: "main"}, CPUs: 2, NUMANode: policy.OnNUMANode(1)},
	} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// wantNRT is pinnedAllocator's state worked out by hand. Shared pool: 2-3,10-11 on node 0 and
// 7,15 on node 1, 6 CPUs of which 2 must stay shared, so 4 may still go exclusive; node 0 has 2
// free whole cores (4 CPUs), node 1 one (2 CPUs): the zones offer 4 and 2, but together only 4.
// Node 0's memory available is its 64 GiB minus the 8 GiB the pinned lammps rank requests. The
// fingerprint is over the snapshot's Fingerprinted pods, hpc/lammps-worker-0, hpc/stream-worker-1
// and hpc/db-0 (a Guaranteed pod in the shared pool), not ?/uid-unknown (the pod the agent cannot
// name, which no scheduler knows either); its value was computed by the xxhash steps of
// pkg/report/nrt's fingerprint test, independently of the podfingerprint library.
const wantNRT = `
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata:
  name: node-a
  ownerReferences:
  - apiVersion: v1
    kind: Node
    name: node-a
    uid: 6f1e5d2c-0000-4000-8000-00000000000a
attributes:
- name: topologyManagerPolicy
  value: single-numa-node
- name: topologyManagerScope
  value: container
- name: nodeTopologyPodsFingerprint
  value: pfp0v001bec39d2200c1da90
- name: nodeTopologyPodsFingerprintMethod
  value: with-exclusive-resources
- name: finegrain.dev/generation
  value: "17"
- name: finegrain.dev/shared-cpus
  value: 2-3,7,10-11,15
- name: finegrain.dev/min-shared-cpus
  value: "2"
- name: finegrain.dev/exclusive-available
  value: "4"
- name: finegrain.dev/sockets
  value: "2"
- name: finegrain.dev/cores-per-socket
  value: "4"
- name: finegrain.dev/threads-per-core
  value: "2"
zones:
- name: node-0
  type: Node
  costs:
  - name: node-0
    value: 10
  - name: node-1
    value: 21
  attributes:
  - name: finegrain.dev/free-cpus
    value: 2-3,10-11
  - name: finegrain.dev/pins
    value: hpc/lammps-worker-0/rank=1,9
  resources:
  - name: cpu
    capacity: "8"
    allocatable: "6"
    available: "4"
  - name: memory
    capacity: "68719476736"
    allocatable: "68719476736"
    available: "60129542144"
- name: node-1
  type: Node
  costs:
  - name: node-0
    value: 21
  - name: node-1
    value: 10
  attributes:
  - name: finegrain.dev/free-cpus
    value: 7,15
  - name: finegrain.dev/pins
    value: hpc/stream-worker-1/rank=4-5,12-13;%3F/uid-unknown/main=6,14
  resources:
  - name: cpu
    capacity: "8"
    allocatable: "8"
    available: "2"
  - name: memory
    capacity: "68719476736"
    allocatable: "68719476736"
    available: "68719476736"
`

func TestBuildMatchesLiteralObject(t *testing.T) {
	topo := twoSocketSMT(t)
	snap := SnapshotOf(pinnedAllocator(t, topo), 17, names)
	for i := range snap.Pins {
		if snap.Pins[i].PodUID == "uid-lammps" {
			snap.Pins[i].Memory = 8 << 30
		}
	}
	snap.Fingerprinted = []nrt.PodName{{Namespace: "hpc", Name: "db-0"}, {Namespace: "hpc", Name: "lammps-worker-0"}, {Namespace: "hpc", Name: "stream-worker-1"}}
	obj, err := Build(testNode, topo, snap, Options{WholeCores: true, MinSharedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(wantNRT), &want); err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var gotMap map[string]any
	if err := yaml.Unmarshal(got, &gotMap); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, gotMap); d != "" {
		t.Errorf("object differs from the literal (-want +got):\n%s\ngot:\n%s", d, got)
	}

	back, err := nrt.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(obj.Zones, back.Zones); d != "" {
		t.Errorf("zones change through unstructured (-built +read):\n%s", d)
	}
}

func TestBuildAvailableCountsSplitCoresUnlessWholeCores(t *testing.T) {
	topo := twoSocketSMT(t)
	a := pinnedAllocator(t, topo)
	// Free node 0's core 2 half way: pin a 1-CPU container that may split cores.
	if _, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: "uid-one", Container: "c"}, CPUs: 1, NUMANode: policy.OnNUMANode(0), AllowSplitCores: true}); err != nil {
		t.Fatal(err)
	}
	snap := SnapshotOf(a, 18, names)
	for _, tt := range []struct {
		whole bool
		want  int64
	}{{false, 3}, {true, 2}} {
		obj, err := Build(testNode, topo, snap, Options{WholeCores: tt.whole})
		if err != nil {
			t.Fatal(err)
		}
		cpu, _ := nrt.ZoneResource(&obj.Zones[0], nrt.ResourceCPU)
		if got := cpu.Available.Value(); got != tt.want {
			t.Errorf("WholeCores=%v: node-0 cpu available = %d, want %d (free CPUs %s)", tt.whole, got, tt.want, snap.Free[0].FreeCPUs)
		}
	}
}

// TestBuildExclusiveAvailableIsNodeWide: with nothing reserved, each NUMA node's zone offers all
// its CPUs, but exclusive requests on both together must leave the shared pool its minimum — what
// the agent's allocator enforces (it refuses the request that would take the last shared CPU).
func TestBuildExclusiveAvailableIsNodeWide(t *testing.T) {
	topo := twoSocketSMT(t)
	for _, tt := range []struct {
		name      string
		minShared int
		opts      Options
		want      string
	}{
		{"split cores, default minimum", 1, Options{}, "15"},
		{"whole cores, default minimum", 1, Options{WholeCores: true}, "14"},
		{"whole cores, minimum 3", 3, Options{WholeCores: true, MinSharedCPUs: 3}, "12"},
		{"split cores, minimum 3", 3, Options{MinSharedCPUs: 3}, "13"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := policy.New(topo, policy.Config{MinSharedCPUs: tt.minShared})
			if err != nil {
				t.Fatal(err)
			}
			obj, err := Build(testNode, topo, SnapshotOf(a, 1, names), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := nrt.AttributeValue(obj.Attributes, nrt.AttrExclusiveAvailable); got != tt.want {
				t.Errorf("%s = %q, want %q", nrt.AttrExclusiveAvailable, got, tt.want)
			}
			if got, _ := nrt.AttributeValue(obj.Attributes, nrt.AttrMinSharedCPUs); got != strconv.Itoa(tt.minShared) {
				t.Errorf("%s = %q, want %d", nrt.AttrMinSharedCPUs, got, tt.minShared)
			}
			sum := 0
			for _, z := range obj.Zones {
				cpu, _ := nrt.ZoneResource(&z, nrt.ResourceCPU)
				sum += int(cpu.Available.Value())
			}
			if want, _ := strconv.Atoi(tt.want); sum <= want {
				t.Errorf("zones offer %d CPUs together, want more than the node-wide %d (else the case shows nothing)", sum, want)
			}
			// What the attribute promises, the allocator gives: fill the node with 1-CPU pins
			// (whole cores when they may not be split) and count.
			per := 2
			if !tt.opts.WholeCores {
				per = 1
			}
			taken := 0
			for i := 0; ; i++ {
				asg, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: "uid-" + strconv.Itoa(i), Container: "c"}, CPUs: per, AllowSplitCores: !tt.opts.WholeCores})
				if err != nil {
					break
				}
				taken += asg.CPUs.Size()
			}
			if want, _ := strconv.Atoi(tt.want); taken != want {
				t.Errorf("the allocator gave %d CPUs to exclusive requests, the attribute promised %d", taken, want)
			}
		})
	}
}

func TestBuildFingerprintCoversPinnedPodsOnce(t *testing.T) {
	topo := twoSocketSMT(t)
	a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		if _, err := a.Allocate(policy.Request{Key: policy.Key{PodUID: "uid-lammps", Container: c}, CPUs: 2}); err != nil {
			t.Fatal(err)
		}
	}
	obj, err := Build(testNode, topo, SnapshotOf(a, 1, names), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := nrt.AttributeValue(obj.Attributes, nrt.AttrPodsFingerprint)
	if want := nrt.PodsFingerprint([]nrt.PodName{{Namespace: "hpc", Name: "lammps-worker-0"}}); got != want {
		t.Errorf("fingerprint of one pod with two pinned containers = %s, want %s", got, want)
	}
	empty, err := Build(testNode, topo, SnapshotOf(mustNew(t, topo), 0, names), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := nrt.AttributeValue(empty.Attributes, nrt.AttrPodsFingerprint); got != "pfp0v001ef46db3751d8e999" {
		t.Errorf("fingerprint with no pins = %s, want the empty set's pfp0v001ef46db3751d8e999", got)
	}
}

func mustNew(t testing.TB, topo *topology.Topology) *policy.Allocator {
	t.Helper()
	a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestBuildRejectsSnapshotsThatDoNotMatch(t *testing.T) {
	topo := twoSocketSMT(t)
	good := SnapshotOf(pinnedAllocator(t, topo), 1, names)
	for _, tt := range []struct {
		name   string
		node   NodeRef
		mutate func(*Snapshot)
		want   string
	}{
		{"no node UID", NodeRef{Name: "node-a"}, func(*Snapshot) {}, "UID"},
		{"agent not started", testNode, func(s *Snapshot) { *s = Snapshot{} }, "no NUMA node"},
		{"unknown NUMA node in free list", testNode, func(s *Snapshot) { s.Free[1].NUMANode = 7 }, "NUMA node 7"},
		{"pin outside the free list", testNode, func(s *Snapshot) { s.Pins[0].NUMANode = 5 }, "NUMA node 5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			s.Free = append([]policy.NUMAFree(nil), good.Free...)
			s.Pins = append([]Pin(nil), good.Pins...)
			tt.mutate(&s)
			if _, err := Build(tt.node, topo, s, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// The node's CPU layout, as Slurm's NodeName lines of a virtual cluster need it, from captured
// and generated sysfs trees: the paper's 2 × 18-core Xeon, a 2 × 20 × 2 SMT Xeon, a 2-CPU VM, and
// an 8-core SMT Xeon with its last two hardware threads offline (whole cores, rounded down).
func TestBuildLayoutAttributes(t *testing.T) {
	for _, tt := range []struct{ tree, sockets, cores, threads string }{
		{"xeon-e5-2697v4-2s", "2", "18", "1"},
		{"xeon-gold-6248-2s-smt", "2", "20", "2"},
		{"vm-kvm-epyc-2cpu", "1", "2", "1"},
		{"xeon-e2278g-offline-isolcpus", "1", "8", "1"},
	} {
		t.Run(tt.tree, func(t *testing.T) {
			topo, err := topology.Discover("../topology/testdata/" + tt.tree + "/sys")
			if err != nil {
				t.Fatal(err)
			}
			a, err := policy.New(topo, policy.Config{MinSharedCPUs: 1})
			if err != nil {
				t.Fatal(err)
			}
			obj, err := Build(testNode, topo, SnapshotOf(a, 1, names), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{nrt.AttrSockets: tt.sockets, nrt.AttrCoresPerSocket: tt.cores, nrt.AttrThreadsPerCore: tt.threads} {
				if got, _ := nrt.AttributeValue(obj.Attributes, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}
