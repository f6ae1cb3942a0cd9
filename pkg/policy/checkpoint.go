package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// CheckpointVersion is the checkpoint format this package writes and reads.
const CheckpointVersion = 1

// ErrChecksum is wrapped by DecodeCheckpoint when a checkpoint's content does not match its
// checksum (a torn write or an edit by hand).
var ErrChecksum = errors.New("checkpoint checksum mismatch")

// Checkpoint is the allocator state that must survive an agent restart.
type Checkpoint struct {
	// Host is the node name the agent ran on.
	Host string
	// Topology is the Fingerprint of the machine the state was made for.
	Topology string
	// Reserved is the reserved pool at the time of writing.
	Reserved cpuset.CPUSet
	// Assignments are the exclusive entries, ordered by key. Mems is not stored: it is always
	// the entry's NUMA node.
	Assignments []Assignment
}

// Checkpoint returns the allocator's state for writing to disk.
func (a *Allocator) Checkpoint(host string) Checkpoint {
	return Checkpoint{Host: host, Topology: Fingerprint(a.topo), Reserved: a.reserved, Assignments: a.Assignments()}
}

// Fingerprint identifies a machine's CPU layout: its possible CPUs (online and offline) and its
// NUMA nodes. It does not change when CPUs go offline or come back, so a checkpoint written
// before a CPU went offline still belongs to the machine; it changes when the checkpoint comes
// from a machine built differently.
func Fingerprint(t *topology.Topology) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpus=%s;nodes=", t.OnlineCPUs.Union(t.OfflineCPUs))
	for i, n := range t.NUMANodes {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d", n.ID)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "tfp1-" + hex.EncodeToString(sum[:8])
}

// The file layout: {"version":1,"checksum":"sha256:…","payload":{…}}. The checksum covers the
// payload re-encoded canonically (fields in declaration order, entries sorted by key), so
// re-indenting the file keeps it valid but changing any value does not.
type checkpointFile struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Payload  json.RawMessage `json:"payload"`
}

type payloadV1 struct {
	Host        string         `json:"host"`
	Topology    string         `json:"topology"`
	Reserved    string         `json:"reserved"`
	Assignments []assignmentV1 `json:"assignments"`
}

type assignmentV1 struct {
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	CPUs      string `json:"cpus"`
	NUMANode  int    `json:"numaNode"`
}

// EncodeCheckpoint writes cp in the current format.
func EncodeCheckpoint(cp Checkpoint) ([]byte, error) {
	p := payloadV1{Host: cp.Host, Topology: cp.Topology, Reserved: cp.Reserved.String(), Assignments: []assignmentV1{}}
	for _, a := range cp.Assignments {
		p.Assignments = append(p.Assignments, assignmentV1{PodUID: a.Key.PodUID, Container: a.Key.Container, CPUs: a.CPUs.String(), NUMANode: int(a.NUMANode)})
	}
	payload, sum, err := canonical(p)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	out, err := json.MarshalIndent(checkpointFile{Version: CheckpointVersion, Checksum: sum, Payload: payload}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return append(out, '\n'), nil
}

func canonical(p payloadV1) (json.RawMessage, string, error) {
	slices.SortFunc(p.Assignments, func(x, y assignmentV1) int {
		return compareKeys(Key{x.PodUID, x.Container}, Key{y.PodUID, y.Container})
	})
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(payload)
	return payload, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// DecodeCheckpoint reads a checkpoint, checking its version, checksum and field formats. It does
// not check the state against a topology; Reconcile does.
func DecodeCheckpoint(data []byte) (Checkpoint, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Checkpoint{}, fmt.Errorf("checkpoint is empty")
	}
	var f checkpointFile
	if err := strictUnmarshal(data, &f); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint is not a finegrain checkpoint: %w", err)
	}
	switch {
	case f.Version == 0:
		return Checkpoint{}, fmt.Errorf("checkpoint has no version field")
	case f.Version > CheckpointVersion:
		return Checkpoint{}, fmt.Errorf("checkpoint has version %d, written by a newer agent; this agent reads version %d", f.Version, CheckpointVersion)
	case f.Version < 0:
		return Checkpoint{}, fmt.Errorf("checkpoint has invalid version %d", f.Version)
	}
	var p payloadV1
	if err := strictUnmarshal(f.Payload, &p); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint payload is malformed: %w", err)
	}
	if _, sum, err := canonical(p); err != nil || sum != f.Checksum {
		return Checkpoint{}, fmt.Errorf("checkpoint payload does not match checksum %q: %w", f.Checksum, ErrChecksum)
	}
	reserved, err := cpulist.Parse(p.Reserved)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint reserved CPUs: %w", err)
	}
	cp := Checkpoint{Host: p.Host, Topology: p.Topology, Reserved: reserved}
	for i, a := range p.Assignments {
		key := Key{PodUID: a.PodUID, Container: a.Container}
		if a.PodUID == "" || a.Container == "" {
			return Checkpoint{}, fmt.Errorf("checkpoint assignment %d has an empty pod UID or container name", i)
		}
		cpus, err := cpulist.Parse(a.CPUs)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint assignment of %s: %w", key, err)
		}
		if a.NUMANode < 0 || a.NUMANode > cpulist.MaxID {
			return Checkpoint{}, fmt.Errorf("checkpoint assignment of %s has NUMA node %d, out of range 0-%d", key, a.NUMANode, cpulist.MaxID)
		}
		cp.Assignments = append(cp.Assignments, Assignment{Key: key, CPUs: cpus, NUMANode: topology.NUMAID(a.NUMANode), Mems: cpuset.New(a.NUMANode)})
	}
	return cp, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}
