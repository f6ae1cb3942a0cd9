package inspect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

var node = report.NodeRef{Name: "node-a", UID: "uid-node-a"}

// snapshot pins, on 2 sockets × 4 cores × 2 threads (core i = CPUs i, i+8; NUMA node 0 =
// 0-3,8-11) with core 0 reserved: hpc/lammps-worker-0 on 1,9 (node 0), hpc/stream-worker-1 on
// 4-5,12-13 and an unnamed pod on 6,14 (node 1). One shared container is known.
func snapshot(t testing.TB) (*topology.Topology, report.Snapshot) {
	t.Helper()
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
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
	names := map[string][2]string{"uid-lammps": {"hpc", "lammps-worker-0"}, "uid-stream": {"hpc", "stream-worker-1"}}
	s := report.SnapshotOf(a, 17, func(uid string) (string, string) { return names[uid][0], names[uid][1] })
	s.SharedContainers = []report.Container{{PodUID: "uid-web", Namespace: "default", Pod: "web-0", Container: "nginx"}}
	return topo, s
}

const wantJSON = `{
  "node": "node-a",
  "source": "agent",
  "generation": 17,
  "sharedCPUs": "2-3,7,10-11,15",
  "reservedCPUs": "0,8",
  "numaNodes": [
    {"id": 0, "capacity": 8, "allocatable": 6, "freeCPUs": "2-3,10-11", "free": 4, "freeCores": 2, "available": 4},
    {"id": 1, "capacity": 8, "allocatable": 8, "freeCPUs": "7,15", "free": 2, "freeCores": 1, "available": 2}
  ],
  "containers": [
    {"namespace": "hpc", "pod": "lammps-worker-0", "podUID": "uid-lammps", "container": "rank", "pool": "exclusive", "cpus": "1,9", "mems": "0", "numaNode": 0},
    {"namespace": "hpc", "pod": "stream-worker-1", "podUID": "uid-stream", "container": "rank", "pool": "exclusive", "cpus": "4-5,12-13", "mems": "1", "numaNode": 1},
    {"podUID": "uid-unknown", "container": "main", "pool": "exclusive", "cpus": "6,14", "mems": "1", "numaNode": 1},
    {"namespace": "default", "pod": "web-0", "podUID": "uid-web", "container": "nginx", "pool": "shared", "cpus": "2-3,7,10-11,15"}
  ]
}`

func jsonMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
	return m
}

func TestFromSnapshotJSON(t *testing.T) {
	_, s := snapshot(t)
	got, err := json.Marshal(FromSnapshot("node-a", SourceAgent, s, report.Options{WholeCores: true}))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(jsonMap(t, []byte(wantJSON)), jsonMap(t, got)); d != "" {
		t.Errorf("pins JSON differs (-want +got):\n%s", d)
	}
}

func TestFromNRTAgreesWithSnapshot(t *testing.T) {
	topo, s := snapshot(t)
	obj, err := report.Build(node, topo, s, report.Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	updated := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &metav1.Time{}}, {Manager: report.FieldManager, Time: &updated}}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	read, err := nrt.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromNRT(read, cpulist.MaxCPUs)
	if err != nil {
		t.Fatal(err)
	}
	want := FromSnapshot("node-a", SourceNRT, s, report.Options{WholeCores: true})
	// What the object does not carry: the reserved set, free whole cores, pod UIDs of named
	// pods, the shared containers.
	want.ReservedCPUs = ""
	for i := range want.NUMANodes {
		want.NUMANodes[i].FreeCores = nil
	}
	want.Containers = want.Containers[:3]
	want.Containers[0].PodUID, want.Containers[1].PodUID = "", ""
	want.Fingerprint, _ = nrt.AttributeValue(obj.Attributes, nrt.AttrPodsFingerprint)
	want.UpdatedAt = &updated.Time
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("view of the published object differs from the agent's (-agent +object):\n%s", d)
	}
}

func TestFromNRTRejectsForeignObjects(t *testing.T) {
	topo, s := snapshot(t)
	for _, tt := range []struct {
		name   string
		mutate func(*nrt.NodeResourceTopology)
		want   string
	}{
		{"zone without free-cpus", func(o *nrt.NodeResourceTopology) { o.Zones[1].Attributes = o.Zones[1].Attributes[1:] }, "zone node-1 has no finegrain.dev/free-cpus"},
		{"bad zone name", func(o *nrt.NodeResourceTopology) { o.Zones[0].Name = "socket-0" }, `zone "socket-0"`},
		{"bad free list", func(o *nrt.NodeResourceTopology) { o.Zones[0].Attributes[0].Value = "3-1" }, "not a CPU list"},
		{"bad pins", func(o *nrt.NodeResourceTopology) { o.Zones[0].Attributes[1].Value = "hpc/x=1" }, "finegrain.dev/pins"},
		{"bad generation", func(o *nrt.NodeResourceTopology) { o.Attributes[4].Value = "-1" }, "generation"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := report.Build(node, topo, s, report.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(obj)
			if _, err := FromNRT(obj, cpulist.MaxCPUs); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "NodeResourceTopology node-a") {
				t.Errorf("FromNRT = %v, want an error naming the object and %q", err, tt.want)
			}
		})
	}
}

const wantTable = `Node node-a (from agent): generation 17, shared pool 2-3,7,10-11,15, reserved 0,8
  new containers found through nri, informer, scan
  NodeResourceTopology published generation 16 1.5s ago

NUMA NODE  CPUS  ALLOCATABLE  FREE  FREE CORES  AVAILABLE  FREE CPUS
0          8     6            4     2           4          2-3,10-11
1          8     8            2     1           2          7,15

POD                  CONTAINER  POOL       CPUS            MEMS  NUMA NODE
hpc/lammps-worker-0  rank       exclusive  1,9             0     0
hpc/stream-worker-1  rank       exclusive  4-5,12-13       1     1
pod uid-unknown      main       exclusive  6,14            1     1
default/web-0        nginx      shared     2-3,7,10-11,15  -     -
`

func TestWriteTable(t *testing.T) {
	_, s := snapshot(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v := FromSnapshot("node-a", SourceAgent, s, report.Options{WholeCores: true})
	v.Published = &report.Status{Generation: 16, At: now.Add(-1500 * time.Millisecond)}
	v.Paths = []string{"nri", "informer", "scan"}
	var b bytes.Buffer
	if err := WriteTable(&b, v, now); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantTable, b.String()); d != "" {
		t.Errorf("table differs (-want +got):\n%s", d)
	}

	v.Containers = v.Containers[:1]
	v.Published = &report.Status{Error: "apply NodeResourceTopology node-a: forbidden"}
	b.Reset()
	if err := WriteTable(&b, v, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT up to date: apply NodeResourceTopology node-a: forbidden", "(every other container)             shared     2-3,7,10-11,15"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func FuzzFromNRT(f *testing.F) {
	topo, s := snapshot(f)
	obj, err := report.Build(node, topo, s, report.Options{})
	if err != nil {
		f.Fatal(err)
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := json.Marshal(u.Object)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"apiVersion":"topology.node.k8s.io/v1alpha2","metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","attributes":[{"name":"finegrain.dev/free-cpus","value":"0-3"}]}]}`))
	f.Add([]byte(`{"zones":[{"name":"node-x","type":"Node"}],"attributes":[{"name":"finegrain.dev/generation","value":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		o, err := nrt.FromUnstructured(&unstructured.Unstructured{Object: m})
		if err != nil {
			return
		}
		v, err := FromNRT(o, cpulist.MaxCPUs)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteTable(&b, v, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
}

// Finding 3 of issue 21 (kubectl finegrain's path): lists that name more CPUs than the node has
// are refused, never expanded in proportion to their text.
func TestFromNRTBounded(t *testing.T) {
	topo, s := snapshot(t)
	for _, tt := range []struct {
		name   string
		mutate func(*nrt.NodeResourceTopology)
		want   string
	}{
		{"free list of every CPU number", func(o *nrt.NodeResourceTopology) { o.Zones[0].Attributes[0].Value = "0-16383" },
			"the free-cpus and pins lists name more than the node's 64 CPUs"},
		{"pins of many full entries", func(o *nrt.NodeResourceTopology) {
			o.Zones[0].Attributes[1].Value = strings.Repeat("a/b/c=0-16383;", 10_000) + "a/b/c=0"
		}, "finegrain.dev/pins"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := report.Build(node, topo, s, report.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(obj)
			if _, err := FromNRT(obj, 64); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromNRT = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
