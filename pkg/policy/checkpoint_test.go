package policy

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

func sampleCheckpoint(t testing.TB) ([]byte, Checkpoint) {
	t.Helper()
	a := newAllocator(t, synthetic(t, paperNode), "0-1", 1)
	for _, r := range []Request{req("b", 4), {Key: key("a"), CPUs: 8, NUMANode: OnNUMANode(1)}} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatal(err)
		}
	}
	cp := a.Checkpoint("node-a")
	data, err := EncodeCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	return data, cp
}

var cmpSets = cmp.Comparer(func(x, y cpuset.CPUSet) bool { return x.Equals(y) })

func TestCheckpointRoundTrip(t *testing.T) {
	data, cp := sampleCheckpoint(t)
	got, err := DecodeCheckpoint(data)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, data)
	}
	if diff := cmp.Diff(cp, got, cmpSets); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, want := range []string{`"version": 1`, `"checksum": "sha256:`, `"cpus": "18-25"`, `"numaNode": 1`, `"reserved": "0-1"`, `"host": "node-a"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("checkpoint lacks %s:\n%s", want, data)
		}
	}
	// Re-indenting keeps the checkpoint valid: the checksum covers the canonical payload.
	flat := bytes.Join(bytes.Fields(data), nil)
	if _, err := DecodeCheckpoint(flat); err != nil {
		t.Errorf("decode re-indented checkpoint: %v", err)
	}
}

func TestDecodeCheckpointRejectsBadInput(t *testing.T) {
	data, _ := sampleCheckpoint(t)
	good := string(data)
	cases := []struct {
		name, data, want string
	}{
		{"empty", "  \n", "checkpoint is empty"},
		{"not JSON", "{\"version\":1,", "not a finegrain checkpoint"},
		{"truncated", good[:len(good)/2], "not a finegrain checkpoint"},
		{"no version", `{"checksum":"x","payload":{}}`, "no version field"},
		{"newer", strings.Replace(good, `"version": 1`, `"version": 2`, 1), "version 2, written by a newer agent"},
		{"negative version", strings.Replace(good, `"version": 1`, `"version": -1`, 1), "invalid version -1"},
		{"edited CPUs", strings.Replace(good, `"cpus": "18-25"`, `"cpus": "18-26"`, 1), "does not match checksum"},
		{"unknown field", strings.Replace(good, `"host":`, `"extra": 1, "host":`, 1), "unknown field"},
		{"trailing data", good + "{}", "trailing data"},
	}
	for _, tc := range cases {
		_, err := DecodeCheckpoint([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	_, err := DecodeCheckpoint([]byte(strings.Replace(good, `"cpus": "18-25"`, `"cpus": "18-26"`, 1)))
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("edited checkpoint: error %v does not wrap ErrChecksum", err)
	}
}

// TestDecodeCheckpointValidatesFields covers payloads whose checksum is right but whose values are
// malformed: a writer bug, not a torn write.
func TestDecodeCheckpointValidatesFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    payloadV1
		want string
	}{
		{"bad reserved", payloadV1{Reserved: "1-0"}, "runs backwards"},
		{"bad cpus", payloadV1{Assignments: []assignmentV1{{PodUID: "u", Container: "c", CPUs: "x"}}}, `"x" is not a CPU number`},
		{"huge cpus", payloadV1{Assignments: []assignmentV1{{PodUID: "u", Container: "c", CPUs: "0-99999"}}}, "out of range"},
		{"no container", payloadV1{Assignments: []assignmentV1{{PodUID: "u", CPUs: "1"}}}, "empty pod UID or container name"},
		{"negative node", payloadV1{Assignments: []assignmentV1{{PodUID: "u", Container: "c", CPUs: "1", NUMANode: -1}}}, "NUMA node -1, out of range"},
	} {
		payload, sum, err := canonical(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		data := []byte(`{"version":1,"checksum":"` + sum + `","payload":` + string(payload) + `}`)
		if _, err := DecodeCheckpoint(data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestFingerprintIgnoresOfflining(t *testing.T) {
	topo := memoryOnlyAndDegraded(t) // CPU 7 offline
	full := synthetic(t, dualSocketHT)
	if Fingerprint(topo) == Fingerprint(full) {
		t.Error("different machines share a fingerprint")
	}
	if got := Fingerprint(topo); !strings.HasPrefix(got, "tfp1-") || len(got) != 21 {
		t.Errorf("fingerprint %q, want tfp1- and 16 hex digits", got)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	data, _ := sampleCheckpoint(f)
	f.Add(data)
	f.Add([]byte(`{"version":1,"checksum":"","payload":{"host":"","topology":"","reserved":"","assignments":[]}}`))
	f.Add([]byte(`{"version":1,"checksum":"sha256:00","payload":{"reserved":"0-16383"}}`))
	f.Add([]byte(`{"version":1,"payload":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := DecodeCheckpoint(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		// Whatever decodes must survive a round trip unchanged.
		again, err := EncodeCheckpoint(cp)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		cp2, err := DecodeCheckpoint(again)
		if err != nil {
			t.Fatalf("decode re-encoded checkpoint: %v\n%s", err, again)
		}
		if diff := cmp.Diff(cp, cp2, cmpSets); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
