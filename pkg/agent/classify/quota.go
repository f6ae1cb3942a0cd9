package classify

import (
	"fmt"
	"math"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Policy says which of a shared container's resource quantities becomes its enforced CPU quota
// or memory limit.
//
//   - Off leaves the kubelet's values alone.
//   - Limit enforces the container's limit, and no limit where it has none (what the kubelet
//     sets; the agent re-asserts it, so a hand-edited quota is repaired).
//   - Request enforces the container's request (its limit when it has no request): a service
//     gets what it asked the scheduler for and cannot burst into the shared pool beyond it.
//     A container with neither (BestEffort) gets no limit; the kubelet gives it the smallest CPU
//     shares instead.
type Policy string

// Policies.
const (
	Off     Policy = "off"
	Limit   Policy = "limit"
	Request Policy = "request"
)

// ParsePolicy accepts "off", "limit" or "request".
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Off, Limit, Request:
		return p, nil
	}
	return "", fmt.Errorf("policy %q: want off, limit or request", truncate(s))
}

// minQuotaUS is the smallest CFS quota the kernel accepts (and the kubelet writes).
const minQuotaUS = 1000

// sharedResources is the CPU quota and memory limit of a shared container under cfg.
func sharedResources(r corev1.ResourceRequirements, cfg Config) cgroup.Resources {
	var out cgroup.Resources
	if q, ok := pick(r, corev1.ResourceCPU, cfg.CPUQuota); ok {
		out.CPUQuota = cgroup.Quota{QuotaUS: quotaUS(q, cfg.CPUPeriodUS), PeriodUS: cfg.CPUPeriodUS}
	} else if cfg.CPUQuota != Off {
		out.CPUQuota = cgroup.Quota{QuotaUS: cgroup.QuotaUnlimited, PeriodUS: cfg.CPUPeriodUS}
	}
	if q, ok := pick(r, corev1.ResourceMemory, cfg.MemoryLimit); ok {
		out.MemoryLimit = memoryBytes(q)
	} else if cfg.MemoryLimit != Off {
		out.MemoryLimit = cgroup.MemoryUnlimited
	}
	return out
}

// pick returns the quantity policy p enforces for resource name, if any.
func pick(r corev1.ResourceRequirements, name corev1.ResourceName, p Policy) (resource.Quantity, bool) {
	positive := func(l corev1.ResourceList) (resource.Quantity, bool) {
		q, ok := l[name]
		return q, ok && q.Sign() > 0
	}
	switch p {
	case Limit:
		return positive(r.Limits)
	case Request:
		if q, ok := positive(r.Requests); ok {
			return q, true
		}
		return positive(r.Limits)
	}
	return resource.Quantity{}, false
}

// quotaUS converts CPUs to microseconds per period the way the kubelet does, rounding up and
// never below the kernel's minimum.
func quotaUS(q resource.Quantity, periodUS uint64) int64 {
	milli := q.MilliValue()
	const maxMilli = math.MaxInt64 / 1000000
	if milli > maxMilli {
		milli = maxMilli
	}
	us := (milli*int64(periodUS) + 999) / 1000
	if us < minQuotaUS {
		us = minQuotaUS
	}
	return us
}

// memoryBytes converts a memory quantity to a limit of at least one page.
func memoryBytes(q resource.Quantity) int64 {
	b := q.Value()
	if page := int64(os.Getpagesize()); b < page {
		return page
	}
	return b
}

// qosOf returns the pod's QoS class from its status, or computes it from the spec the way the
// API server does when the status does not carry a valid one yet.
func qosOf(pod *corev1.Pod) cgroup.QOSClass {
	if q, err := cgroup.ParseQOSClass(string(pod.Status.QOSClass)); err == nil {
		return q
	}
	some, guaranteed := false, true
	check := func(r corev1.ResourceRequirements) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := r.Requests[name]
			lim, hasLim := r.Limits[name]
			if hasReq && !req.IsZero() || hasLim && !lim.IsZero() {
				some = true
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		check(c.Resources)
	}
	for _, c := range pod.Spec.InitContainers {
		check(c.Resources)
	}
	switch {
	case !some:
		return cgroup.BestEffort
	case guaranteed:
		return cgroup.Guaranteed
	}
	return cgroup.Burstable
}
