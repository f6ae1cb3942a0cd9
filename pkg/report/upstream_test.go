package report

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2/helper/attribute"
	"github.com/k8stopologyawareschedwg/podfingerprint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// upstreamPod is a pod of node-a as scheduler-plugins' NodeResourceTopology cache lists it.
func upstreamPod(name string, phase corev1.PodPhase, qos corev1.PodQOSClass, cpu, memory string, pinned bool) *corev1.Pod {
	r := corev1.ResourceList{}
	if cpu != "" {
		r[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		r[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: name},
		Spec:       corev1.PodSpec{NodeName: testNode.Name, Containers: []corev1.Container{{Name: "rank", Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}},
		Status:     corev1.PodStatus{Phase: phase, QOSClass: qos},
	}
	if pinned {
		p.Labels = map[string]string{"finegrain.dev/pinning": "exclusive"}
	}
	return p
}

// TestPublishedObjectPassesSchedulerPluginsFingerprintCheck follows what scheduler-plugins'
// NodeResourceTopology cache does on resync with the object the agent publishes for a node of
// mixed pods: decode it into the upstream v1alpha2 type, read the fingerprint and its method with
// the upstream attribute helper (the method makes it count only pods with exclusive resources),
// add the node's pods it counts to a podfingerprint tracing fingerprint and Check the published
// value. The pods it counts are listed by hand from its rule (Guaranteed, or an extended
// resource; bound and not Pending): a Burstable pinned pod is not among them, a Guaranteed pod in
// the shared pool is.
func TestPublishedObjectPassesSchedulerPluginsFingerprintCheck(t *testing.T) {
	G, B := corev1.PodQOSGuaranteed, corev1.PodQOSBurstable
	nodePods := []*corev1.Pod{
		upstreamPod("lammps-worker-0", corev1.PodRunning, G, "2", "8Gi", true),
		upstreamPod("stream-worker-1", corev1.PodRunning, B, "4", "", true),
		upstreamPod("db-0", corev1.PodRunning, G, "500m", "1Gi", false),
		upstreamPod("web-0", corev1.PodRunning, B, "100m", "64Mi", false),
		upstreamPod("next-worker", corev1.PodPending, G, "2", "1Gi", true),
		upstreamPod("done-worker", corev1.PodSucceeded, G, "2", "1Gi", true),
	}
	countedUpstream := []string{"lammps-worker-0", "db-0", "done-worker"}

	topo := twoSocketSMT(t)
	snap := SnapshotOf(pinnedAllocator(t, topo), 3, names)
	snap.Fingerprinted = nil
	for _, p := range nodePods {
		if nrt.CountsInFingerprint(p) {
			snap.Fingerprinted = append(snap.Fingerprinted, nrt.PodName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	obj, err := Build(testNode, topo, snap, Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var got v1alpha2.NodeResourceTopology
	if err := json.Unmarshal(wire, &got); err != nil {
		t.Fatalf("the published object does not decode into the upstream type: %v", err)
	}

	if len(got.TopologyPolicies) != 0 {
		t.Errorf("the object carries the deprecated topologyPolicies %v", got.TopologyPolicies)
	}
	for name, want := range map[string]string{"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"} {
		if a, ok := attribute.Get(got.Attributes, name); !ok || a.Value != want {
			t.Errorf("attribute %s = %+v, want %q", name, a, want)
		}
	}
	method, ok := attribute.Get(got.Attributes, podfingerprint.AttributeMethod)
	if !ok || method.Value != podfingerprint.MethodWithExclusiveResources {
		t.Fatalf("attribute %s = %+v, want %s", podfingerprint.AttributeMethod, method, podfingerprint.MethodWithExclusiveResources)
	}
	sign, ok := attribute.Get(got.Attributes, podfingerprint.Attribute)
	if !ok {
		t.Fatalf("no %s attribute", podfingerprint.Attribute)
	}

	status := podfingerprint.MakeStatus(testNode.Name)
	fp := podfingerprint.NewTracingFingerprint(len(nodePods), &status)
	for _, p := range nodePods {
		if slices.Contains(countedUpstream, p.Name) {
			_ = fp.Add(p.Namespace, p.Name)
		}
	}
	if err := fp.Check(sign.Value); err != nil {
		t.Errorf("upstream's check of %s: %v\n%s", sign.Value, err, status.Repr())
	}

	// What finegrain published before: the pods holding pins, whatever their QoS class.
	pinnedOnly := podfingerprint.NewFingerprint(0)
	for _, p := range nodePods {
		if p.Labels != nil && p.Status.Phase == corev1.PodRunning {
			_ = pinnedOnly.Add(p.Namespace, p.Name)
		}
	}
	if err := pinnedOnly.Check(sign.Value); !errors.Is(err, podfingerprint.ErrSignatureMismatch) {
		t.Errorf("the pinned pods' set checks against the published fingerprint (%v): the test does not tell the two sets apart", err)
	}

}
