package snapshot

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Resources is an amount of node-level resources: what a pod requests or a node offers.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
	// Scalars are extended resources and hugepages, sorted by name, zero amounts left out.
	Scalars []Scalar
}

// Scalar is an amount of one extended resource.
type Scalar struct {
	Name  corev1.ResourceName
	Value int64
}

// ResourcesOf converts a ResourceList.
func ResourcesOf(list corev1.ResourceList) Resources {
	var r Resources
	r.addList(list)
	return r
}

func (r *Resources) addList(list corev1.ResourceList) {
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.Pods += q.Value()
		default:
			if v := q.Value(); v != 0 {
				r.addScalar(name, v)
			}
		}
	}
}

func (r *Resources) addScalar(name corev1.ResourceName, v int64) {
	i, found := slices.BinarySearchFunc(r.Scalars, name, func(s Scalar, n corev1.ResourceName) int {
		return strings.Compare(string(s.Name), string(n))
	})
	if found {
		r.Scalars[i].Value += v
		return
	}
	r.Scalars = slices.Insert(r.Scalars, i, Scalar{Name: name, Value: v})
}

// Add adds o to r.
func (r *Resources) Add(o *Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.Pods += o.Pods
	for _, s := range o.Scalars {
		r.addScalar(s.Name, s.Value)
	}
}

// equal reports whether r and o are the same amounts.
func (r *Resources) equal(o *Resources) bool {
	return r.MilliCPU == o.MilliCPU && r.Memory == o.Memory && r.EphemeralStorage == o.EphemeralStorage &&
		r.Pods == o.Pods && slices.Equal(r.Scalars, o.Scalars)
}

// Scalar returns the amount of one extended resource.
func (r *Resources) Scalar(name corev1.ResourceName) int64 {
	for _, s := range r.Scalars {
		if s.Name == name {
			return s.Value
		}
	}
	return 0
}

// max raises every amount of r to at least o's.
func (r *Resources) max(o *Resources) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	for _, s := range o.Scalars {
		if cur := r.Scalar(s.Name); s.Value > cur {
			r.addScalar(s.Name, s.Value-cur)
		}
	}
}

// containerRequests is a container's requests, a resource given only as a limit counting as
// requested (the API server's defaulting, repeated for hand-written objects).
func containerRequests(c *corev1.Container) Resources {
	r := ResourcesOf(c.Resources.Requests)
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			r.addList(corev1.ResourceList{name: q})
		}
	}
	return r
}

// PodRequests is what a pod takes from its node, computed the way kube-scheduler does: the sum
// of its containers and restartable (sidecar) init containers, or the largest init container
// plus the sidecars started before it if that is more, plus the pod overhead and one pod slot.
func PodRequests(pod *corev1.Pod) Resources {
	var sum, sidecars, peak Resources
	for i := range pod.Spec.Containers {
		r := containerRequests(&pod.Spec.Containers[i])
		sum.Add(&r)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(&r)
			continue
		}
		r.Add(&sidecars)
		peak.max(&r)
	}
	sum.Add(&sidecars)
	sum.max(&peak)
	overhead := ResourcesOf(pod.Spec.Overhead)
	sum.Add(&overhead)
	sum.Pods = 1
	return sum
}

// PinnedDemand is what a pod asks of one NUMA node: the whole CPUs of its containers with an
// integer CPU request and the memory those containers request. It is zero for pods that do not
// carry the exclusive pinning label, which the node agent leaves in the shared pool.
func PinnedDemand(pod *corev1.Pod) (cpus int, memory int64) {
	if pod.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive {
		return 0, 0
	}
	for i := range pod.Spec.Containers {
		r := containerRequests(&pod.Spec.Containers[i])
		if r.MilliCPU > 0 && r.MilliCPU%1000 == 0 {
			cpus += int(r.MilliCPU / 1000)
			memory += r.Memory
		}
	}
	return cpus, memory
}
