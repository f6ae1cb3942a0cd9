package nrt

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

func freeCoreMapObject(t testing.TB) *NodeResourceTopology {
	t.Helper()
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	return &NodeResourceTopology{
		Attributes: []Attribute{
			{Name: AttrTopologyManagerPolicy, Value: PolicySingleNUMANode},
			{Name: AttrPodsFingerprint, Value: PodsFingerprint(nil)},
			{Name: AttrGeneration, Value: "12"},
			{Name: AttrMinSharedCPUs, Value: "1"},
			{Name: AttrExclusiveAvailable, Value: "lots"},
		},
		Zones: []Zone{
			{Name: ZoneName(0), Type: ZoneTypeNode,
				Attributes: []Attribute{{Name: AttrFreeCPUs, Value: "1-17"}, {Name: AttrPins, Value: FormatPins([]PinEntry{{Namespace: "hpc", Pod: "w", Container: "c", CPUs: cpuset.New(0)}})}},
				Resources:  []ResourceInfo{{Name: ResourceCPU, Capacity: q(18), Allocatable: q(18), Available: q(16)}}},
			{Name: "socket-0", Type: "Socket"},
			{Name: ZoneName(1), Type: ZoneTypeNode, Attributes: []Attribute{{Name: AttrFreeCPUs, Value: "18-35"}}},
		},
	}
}

func TestReadFreeCoreMap(t *testing.T) {
	o := freeCoreMapObject(t)
	o.Name = "n1"
	u, err := ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFreeCoreMap(u, 36)
	if err != nil {
		t.Fatal(err)
	}
	want := &FreeCoreMap{
		Fingerprint: PodsFingerprint(nil), Generation: 12, MinSharedCPUs: 1, HasMinSharedCPUs: true,
		Zones: []FreeZone{
			{Name: "node-0", NUMA: 0, FreeCPUs: "1-17", Free: 17, Pins: "hpc/w/c=0", Pinned: 1,
				CPU: Amounts{Available: 16, Allocatable: 18, HasAvailable: true, HasAllocatable: true}},
			{Name: "node-1", NUMA: 1, FreeCPUs: "18-35", Free: 18},
		},
		Problems: []string{`attribute finegrain.dev/exclusive-available="lots" is not a count of CPUs; taken as absent`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("free-core map (-want +got):\n%s", d)
	}

	u.Object["zones"].([]any)[2].(map[string]any)["attributes"] = []any{map[string]any{"name": AttrFreeCPUs, "value": "0-16384"}}
	if _, err := ReadFreeCoreMap(u, 36); err == nil || !strings.Contains(err.Error(), `NodeResourceTopology n1 zone "node-1": attribute finegrain.dev/free-cpus="0-16384" is not a CPU list`) {
		t.Errorf("an out-of-range free list: %v", err)
	}
}

// Reading a well-formed map allocates its zones and nothing else: the placer reads one per node.
func TestReadFreeCoreMapAllocations(t *testing.T) {
	o := freeCoreMapObject(t)
	o.Attributes[4].Value = "30"
	u, err := ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ReadFreeCoreMap(u, 36) }); n > 2 {
		t.Errorf("ReadFreeCoreMap allocates %.0f times, want 2 (the map and its zones)", n)
	}
}

// Finding 3 of issue 21: lists from the API were expanded in proportion to their text. A map whose
// free-cpus and pins lists name more CPUs than its Node has (36 here: 18 free and 1 pinned in
// zone 0, 18 free in zone 1) is refused, naming the attribute, after counting no more than that.
func TestReadFreeCoreMapOversized(t *testing.T) {
	for _, tc := range []struct {
		name, zone0Free, zone0Pins, attr string
	}{
		{"free list", "0-16383", "", AttrFreeCPUs},
		{"pins of many entries", "1-17", strings.Repeat("a/b/c=0-16383;", 10_000) + "a/b/c=0", AttrPins},
		{"pins just past the bound", "1-17", "a/b/c=0;a/b/d=18-36", AttrPins},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := freeCoreMapObject(t)
			o.Name = "n1"
			o.Zones[0].Attributes = []Attribute{{Name: AttrFreeCPUs, Value: tc.zone0Free}, {Name: AttrPins, Value: tc.zone0Pins}}
			u, err := ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ReadFreeCoreMap(u, 36)
			var tm *cpulist.TooManyError
			if !errors.As(err, &tm) || !strings.Contains(err.Error(), "NodeResourceTopology n1 zone \"node-0\": attribute "+tc.attr+": the map's free-cpus and pins lists name more than the node's 36 CPUs") {
				t.Errorf("error %v, want the oversized %s named", err, tc.attr)
			}
			if strings.Contains(err.Error(), "0-16383") {
				t.Errorf("the error quotes the hostile list: %v", err)
			}
		})
	}
	// Exactly the node's CPUs is fine.
	o := freeCoreMapObject(t)
	u, _ := ToUnstructured(o)
	if _, err := ReadFreeCoreMap(u, 36); err != nil {
		t.Errorf("a map of 36 CPUs on a node of 36: %v", err)
	}
	if _, err := ReadFreeCoreMap(u, 35); err == nil {
		t.Error("a map of 36 CPUs on a node of 35 was read")
	}
}
