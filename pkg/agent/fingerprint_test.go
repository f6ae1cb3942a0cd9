package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// withMemory gives every container of p a memory request and limit of q.
func withMemory(p *corev1.Pod, q string) *corev1.Pod {
	for i := range p.Spec.Containers {
		r := &p.Spec.Containers[i].Resources
		r.Requests[corev1.ResourceMemory] = resource.MustParse(q)
		r.Limits[corev1.ResourceMemory] = resource.MustParse(q)
	}
	return p
}

// TestSnapshotFingerprintsThePodsSchedulerPluginsCounts: on a node with mixed pods the snapshot's
// Fingerprinted are the pods scheduler-plugins counts under with-exclusive-resources — the running
// Guaranteed ones, pinned or not — not the pods holding pins; a pod turning Running is a change
// (a new generation, subscribers told), and a pinned container's memory request is on its pin.
func TestSnapshotFingerprintsThePodsSchedulerPluginsCounts(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	changes, cancel := e.a.Subscribe()
	defer cancel()

	guaranteedPinned := withMemory(newPod("guaranteed-pinned", exclusiveLabel, "2"), "1Gi")
	burstablePinned := newPod("burstable-pinned", exclusiveLabel, "2")
	burstablePinned.Status.QOSClass = corev1.PodQOSBurstable
	guaranteedShared := withMemory(newPod("guaranteed-shared", nil, "500m"), "256Mi")
	bestEffort := newPod("best-effort", nil)
	bestEffort.Spec.Containers = []corev1.Container{{Name: "c0"}}
	bestEffort.Status.QOSClass = corev1.PodQOSBestEffort
	for i, p := range []*corev1.Pod{guaranteedPinned, burstablePinned, guaranteedShared, bestEffort} {
		e.apply(withStatus(p, hexID(byte('1'+i))))
	}
	pending := withMemory(newPod("guaranteed-pending", nil, "1"), "64Mi")
	e.apply(pending)
	e.a.DrainPods(context.Background())

	s := e.a.Snapshot()
	want := []nrt.PodName{{Namespace: "ns", Name: "guaranteed-pinned"}, {Namespace: "ns", Name: "guaranteed-shared"}}
	got := slices.Clone(s.Fingerprinted)
	slices.SortFunc(got, func(a, b nrt.PodName) int { return strings.Compare(a.Name, b.Name) })
	if !slices.Equal(got, want) {
		t.Errorf("Fingerprinted = %v, want %v", got, want)
	}
	if len(s.Pins) != 2 {
		t.Fatalf("pins %+v, want both opted-in pods pinned", s.Pins)
	}
	for _, p := range s.Pins {
		wantMem := int64(0)
		if p.Pod == "guaranteed-pinned" {
			wantMem = 1 << 30
		}
		if p.Memory != wantMem {
			t.Errorf("pin of %s/%s has Memory %d, want %d", p.Pod, p.Container, p.Memory, wantMem)
		}
	}

	for len(changes) > 0 {
		<-changes
	}
	e.apply(withStatus(pending, hexID('9')))
	e.a.DrainPods(context.Background())
	select {
	case <-changes:
	default:
		t.Error("a Guaranteed pod turning Running told no subscriber")
	}
	after := e.a.Snapshot()
	if after.Generation <= s.Generation {
		t.Errorf("generation %d after the pod turned Running, was %d", after.Generation, s.Generation)
	}
	if !slices.Contains(after.Fingerprinted, nrt.PodName{Namespace: "ns", Name: "guaranteed-pending"}) {
		t.Errorf("Fingerprinted = %v, want the pod that turned Running in it", after.Fingerprinted)
	}
}
