package snapshot

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// podInfo is what a snapshot takes from a pod that counts on its node, read once when the pod
// is seen.
type podInfo struct {
	namespace, name string
	// key is "namespace/name" when known ("" in Build, which needs it for few pods: podKey).
	key       string
	requests  Resources
	job       JobOnNode
	hasJob    bool
	hostPorts []HostPort
	// pinnedCPUs and pinnedMemory are PinnedDemand.
	pinnedCPUs   int
	pinnedMemory int64
	// numaHint is the NUMA node the placer annotated (hasHint false without a readable one, or
	// on a pod the placer does not vouch for).
	numaHint int
	hasHint  bool
}

// countedOn returns the node a pod's requests count on: its node, unless it is pending ("") or
// has terminated.
func countedOn(p *corev1.Pod) string {
	if p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return ""
	}
	return p.Spec.NodeName
}

// newPodInfo reads a pod; t says which of its claims count (trust.vouch: nil for the placer's
// own pods).
func newPodInfo(p *corev1.Pod, key string, t *trust) podInfo {
	info := podInfo{key: key, namespace: p.Namespace, name: p.Name, requests: PodRequests(p), hostPorts: HostPortsOf(p)}
	var hint bool
	info.job, info.hasJob, hint = t.vouch(p)
	info.pinnedCPUs, info.pinnedMemory = PinnedDemand(p)
	if v, ok := p.Annotations[v1alpha1.AnnotationNUMANode]; ok && hint {
		if id, err := strconv.Atoi(v); err == nil {
			info.numaHint, info.hasHint = id, true
		}
	}
	return info
}

// podKey returns "namespace/name".
func (a *podInfo) podKey() string {
	if a.key == "" {
		return a.namespace + "/" + a.name
	}
	return a.key
}

// equal reports whether two pods count the same on a node.
func (a *podInfo) equal(b *podInfo) bool {
	return a.namespace == b.namespace && a.name == b.name && a.requests.equal(&b.requests) && a.job == b.job && a.hasJob == b.hasJob &&
		slices.Equal(a.hostPorts, b.hostPorts) && a.pinnedCPUs == b.pinnedCPUs && a.pinnedMemory == b.pinnedMemory &&
		a.numaHint == b.numaHint && a.hasHint == b.hasHint
}
