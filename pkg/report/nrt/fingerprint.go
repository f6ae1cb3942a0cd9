package nrt

import (
	"slices"
	"strings"

	"github.com/k8stopologyawareschedwg/podfingerprint"
	corev1 "k8s.io/api/core/v1"
)

// FingerprintPrefix starts every fingerprint: "pfp0" then the algorithm version "v001".
const FingerprintPrefix = podfingerprint.Prefix + podfingerprint.Version

// PodName identifies a pod the way the fingerprint does: by namespace and name only.
type PodName struct {
	Namespace, Name string
}

// PodsFingerprint computes, with the podfingerprint library scheduler-plugins' NodeResourceTopology
// cache and node-feature-discovery's topology-updater use, the fingerprint of a pod set, so a
// reader can tell whether an object already accounts for the pods it has bound to the node:
// "pfp0v001" then 16 hex digits that depend on the set only, not on the order of its pods. A pod
// listed twice counts once. The empty set yields "pfp0v001ef46db3751d8e999".
func PodsFingerprint(pods []PodName) string {
	set := slices.Clone(pods)
	slices.SortFunc(set, func(a, b PodName) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	set = slices.Compact(set)
	fp := podfingerprint.NewFingerprint(len(set))
	for _, p := range set {
		_ = fp.Add(p.Namespace, p.Name) // never fails
	}
	return fp.Sign()
}

// CountsInFingerprint reports whether the pods fingerprint of the node pod is bound to covers pod
// under MethodWithExclusiveResources, as scheduler-plugins' NodeResourceTopology cache decides it
// when it checks the fingerprint (its default, dedicated pod informer): the pod is past Pending
// (running or finished: the kubelet still accounts for it) and HoldsExclusiveResources.
func CountsInFingerprint(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodPending && HoldsExclusiveResources(pod)
}

// HoldsExclusiveResources reports whether a container or init container of pod requests a
// resource the kubelet gives it exclusively, as scheduler-plugins counts them: any extended
// resource (a name outside the kubernetes.io domain: a device), and in a Guaranteed pod a
// whole-number CPU request, or any memory or huge pages request.
func HoldsExclusiveResources(pod *corev1.Pod) bool {
	guaranteed := isGuaranteed(pod)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for name, q := range c.Resources.Requests {
				switch {
				case !nativeResource(name):
					return true
				case !guaranteed:
				case name == corev1.ResourceCPU && q.Value() > 0 && q.Value()*1000 == q.MilliValue():
					return true
				case (name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)) && q.Value() > 0:
					return true
				}
			}
		}
	}
	return false
}

// nativeResource reports whether name is one of Kubernetes' own resources: unqualified
// (cpu, memory, hugepages-2Mi) or in a kubernetes.io domain.
func nativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isGuaranteed reports whether pod is of the Guaranteed QoS class: its status says so, or, before
// the API server set it, every container and init container has CPU and memory limits and
// requests equal to them (a request left out takes the limit).
func isGuaranteed(pod *corev1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSGuaranteed
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				lim, ok := c.Resources.Limits[name]
				if !ok || lim.IsZero() {
					return false
				}
				if req, ok := c.Resources.Requests[name]; ok && req.Cmp(lim) != 0 {
					return false
				}
			}
		}
	}
	return len(pod.Spec.Containers) > 0
}
