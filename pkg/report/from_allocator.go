package report

import (
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// NameFunc returns the namespace and name of the pod with the given UID, or empty strings when
// they are not known.
type NameFunc func(podUID string) (namespace, pod string)

// PinOf is an allocator's assignment as a pin, its pod not named yet.
func PinOf(a policy.Assignment) Pin {
	return Pin{PodUID: a.Key.PodUID, Container: a.Key.Container, CPUs: a.CPUs, Mems: a.Mems, NUMANode: a.NUMANode}
}

// SnapshotOf reads a Snapshot from an allocator, naming pods with name (nil leaves every pod
// unnamed); its Fingerprinted are the named pods holding pins. The caller must hold whatever lock
// guards the allocator.
func SnapshotOf(a *policy.Allocator, generation uint64, name NameFunc) Snapshot {
	asg := a.Assignments()
	s := Snapshot{
		Generation: generation,
		Pins:       make([]Pin, 0, len(asg)),
		Shared:     a.SharedCPUs(),
		Reserved:   a.ReservedCPUs(),
		Free:       a.Free(),
	}
	for _, x := range asg {
		p := PinOf(x)
		if name != nil {
			p.Namespace, p.Pod = name(x.Key.PodUID)
		}
		if p.Named() {
			s.Fingerprinted = append(s.Fingerprinted, nrt.PodName{Namespace: p.Namespace, Name: p.Pod})
		}
		s.Pins = append(s.Pins, p)
	}
	return s
}
