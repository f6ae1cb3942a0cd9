// Package classify owns the node agent's reading of a pod: which of its containers ask for
// exclusive cores and how many, which NUMA node the placer chose for it, which CPU quota and
// memory limit its shared containers get under the operator's policy, which runtime container IDs
// its status names, and what is wrong with what its author wrote (for events). It is pure: it
// takes a pod object and returns data. It must not allocate CPUs (pkg/policy does), touch cgroups
// or talk to the API server, and nothing it returns is a cgroup path or a cpuset taken from the
// pod: only counts, a validated NUMA node number and limits computed from resource quantities.
package classify

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// The pod label and annotation the agent reads; docs/interfaces.md is their contract.
const (
	// LabelPinning with value PinningExclusive asks for exclusive cores for every container of the
	// pod with an integer CPU request.
	LabelPinning     = "finegrain.dev/pinning"
	PinningExclusive = "exclusive"
	// AnnotationNUMANode is the NUMA node the placer chose; honoured only on pods whose
	// spec.schedulerName is the placer's, and only while the admission policy that keeps it to
	// the placer is in force (Config.HintsDistrusted).
	AnnotationNUMANode = "finegrain.dev/numa-node"
	// DefaultPlacerSchedulerName is the placer's default spec.schedulerName.
	DefaultPlacerSchedulerName = "finegrain-placer"
)

// Event reasons for what is wrong with a pod, in the CamelCase Kubernetes events use.
const (
	ReasonInvalidPinningLabel = "InvalidPinningLabel"
	ReasonNUMAHintIgnored     = "NUMAHintIgnored"
	ReasonInvalidNUMAHint     = "InvalidNUMAHint"
	ReasonNotPinned           = "NotPinned"
)

// maxNUMAAnnotationLen bounds the annotation value the agent parses; cpulist.MaxID has 5 digits.
const maxNUMAAnnotationLen = 5

// Config is the operator's part of classification.
type Config struct {
	// PlacerSchedulerName is the spec.schedulerName of pods the placer binds; only those may carry
	// a NUMA node hint.
	PlacerSchedulerName string
	// HintsDistrusted, when set, says why no NUMA node hint is honoured at all: the agent cannot
	// tell who wrote an annotation, and honours hints only while the admission policy that lets
	// nobody but the placer write them is in force (the agent checks it).
	HintsDistrusted string
	// CPUQuota and MemoryLimit are the enforcement policies for shared containers.
	CPUQuota    Policy
	MemoryLimit Policy
	// CPUPeriodUS is the CFS period the CPU quota is expressed in (the kubelet's default 100000).
	CPUPeriodUS uint64
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.PlacerSchedulerName == "" {
		return fmt.Errorf("placer scheduler name is empty: set it to the placer's schedulerName (default %q)", DefaultPlacerSchedulerName)
	}
	if _, err := ParsePolicy(string(c.CPUQuota)); err != nil {
		return fmt.Errorf("shared CPU quota policy: %w", err)
	}
	if _, err := ParsePolicy(string(c.MemoryLimit)); err != nil {
		return fmt.Errorf("shared memory limit policy: %w", err)
	}
	if c.CPUQuota != Off && (c.CPUPeriodUS < 1000 || c.CPUPeriodUS > 1000000) {
		return fmt.Errorf("CPU period %d µs: want 1000 to 1000000", c.CPUPeriodUS)
	}
	return nil
}

// Pod is what the agent needs to know about one pod.
type Pod struct {
	UID       string
	Namespace string
	Name      string
	// QOS decides where the pod's cgroup lives.
	QOS cgroup.QOSClass
	// Exclusive is true when the pod opted in to exclusive cores.
	Exclusive bool
	// NUMA is the node the placer chose; the zero value lets the allocator choose.
	NUMA policy.NUMAChoice
	// Terminal is true once the pod has succeeded or failed: its containers never run again.
	Terminal bool
	// Fingerprinted is true for a pod the node's pods fingerprint covers
	// (nrt.CountsInFingerprint): past Pending and holding exclusive resources as
	// scheduler-plugins counts them.
	Fingerprinted bool
	// Containers are the pod's containers, regular ones first, in spec order.
	Containers []Container
	// IDs maps the runtime IDs of the containers its status reports as not terminated to their
	// names.
	IDs map[cgroup.ContainerID]string
	// Problems are what is wrong with the pod's opt-in, one event each.
	Problems []Problem
	// Slurm is the pod's part in a virtual cluster (its slurmd, or a job's placeholder); nil for
	// every other pod.
	Slurm *SlurmRole
}

// Container is one container of a pod.
type Container struct {
	Name string
	// CPUs is the number of exclusive CPUs it gets; 0 keeps it in the shared pool.
	CPUs int
	// Memory is its memory request in bytes (0 for none): what a container with exclusive CPUs
	// takes from its NUMA node's memory, to which its cpuset.mems binds it.
	Memory int64
	// Shared is the CPU quota and memory limit it gets while it is in the shared pool (its cpusets
	// are left empty: the agent fills in the shared pool).
	Shared cgroup.Resources
}

// Problem is something wrong with a pod's opt-in, reported as a Warning event.
type Problem struct {
	Reason  string
	Message string
}

// Container returns the container named name.
func (p Pod) Container(name string) (Container, bool) {
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}

// ExclusiveContainers returns the containers that get exclusive CPUs.
func (p Pod) ExclusiveContainers() []Container {
	var out []Container
	for _, c := range p.Containers {
		if c.CPUs > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Classify reads a pod. It never fails: what cannot be honoured becomes a Problem and the
// container concerned stays shared.
func Classify(pod *corev1.Pod, cfg Config) Pod {
	p := Pod{
		UID:       string(pod.UID),
		Namespace: pod.Namespace,
		Name:      pod.Name,
		QOS:       qosOf(pod),
		Terminal:  pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
		IDs:       containerIDs(pod),

		Fingerprinted: nrt.CountsInFingerprint(pod),
	}
	if v, ok := pod.Labels[LabelPinning]; ok {
		if v == PinningExclusive {
			p.Exclusive = true
		} else {
			p.problem(ReasonInvalidPinningLabel, "label %s=%q is not understood: the only value is %q; the pod's containers stay in the shared pool",
				LabelPinning, truncate(v), PinningExclusive)
		}
	}
	p.NUMA = p.numaHint(pod, cfg)
	p.Slurm = slurmRole(pod, cfg)
	for _, c := range pod.Spec.Containers {
		cpus := 0
		if p.Exclusive {
			cpus = p.exclusiveCPUs(c)
		}
		p.Containers = append(p.Containers, Container{Name: c.Name, CPUs: cpus, Memory: c.Resources.Requests.Memory().Value(), Shared: sharedResources(c.Resources, cfg)})
	}
	for _, c := range pod.Spec.InitContainers {
		p.Containers = append(p.Containers, Container{Name: c.Name, Shared: sharedResources(c.Resources, cfg)})
	}
	for _, c := range pod.Spec.EphemeralContainers {
		p.Containers = append(p.Containers, Container{Name: c.Name, Shared: sharedResources(c.Resources, cfg)})
	}
	return p
}

func (p *Pod) problem(reason, format string, args ...any) {
	p.Problems = append(p.Problems, Problem{Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// exclusiveCPUs returns the CPUs a container of an opted-in pod gets, or 0 with a problem.
func (p *Pod) exclusiveCPUs(c corev1.Container) int {
	q, ok := c.Resources.Requests[corev1.ResourceCPU]
	if !ok {
		p.problem(ReasonNotPinned, "container %q stays in the shared pool: it has no CPU request; exclusive cores need a whole-number CPU request such as \"2\"", c.Name)
		return 0
	}
	n, err := policy.CPUCount(q)
	if err != nil {
		p.problem(ReasonNotPinned, "container %q stays in the shared pool: %v", c.Name, err)
		return 0
	}
	return n
}

// numaHint returns the placer's NUMA node choice when the pod may carry one.
func (p *Pod) numaHint(pod *corev1.Pod, cfg Config) policy.NUMAChoice {
	v, ok := pod.Annotations[AnnotationNUMANode]
	if !ok {
		return policy.NUMAChoice{}
	}
	if cfg.HintsDistrusted != "" {
		p.problem(ReasonNUMAHintIgnored, "annotation %s is ignored: %s; the agent chooses the NUMA node", AnnotationNUMANode, cfg.HintsDistrusted)
		return policy.NUMAChoice{}
	}
	if pod.Spec.SchedulerName != cfg.PlacerSchedulerName {
		p.problem(ReasonNUMAHintIgnored, "annotation %s is ignored: only pods scheduled by %q may carry it, this pod's scheduler is %q; the agent chooses the NUMA node",
			AnnotationNUMANode, cfg.PlacerSchedulerName, truncate(pod.Spec.SchedulerName))
		return policy.NUMAChoice{}
	}
	id, err := ParseNUMANode(v)
	if err != nil {
		p.problem(ReasonInvalidNUMAHint, "annotation %s is ignored: %v; the agent chooses the NUMA node", AnnotationNUMANode, err)
		return policy.NUMAChoice{}
	}
	return policy.OnNUMANode(topology.NUMAID(id))
}

// ParseNUMANode reads a NUMA node annotation: a decimal node number without sign, spaces or
// leading zeros, at most cpulist.MaxID.
func ParseNUMANode(s string) (int, error) {
	bad := fmt.Errorf("value %q is not a NUMA node number (want a decimal number such as \"0\")", truncate(s))
	if s == "" || len(s) > maxNUMAAnnotationLen || (len(s) > 1 && s[0] == '0') {
		return 0, bad
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	id, err := strconv.Atoi(s)
	if err != nil || id > cpulist.MaxID {
		return 0, fmt.Errorf("NUMA node %q is out of range 0-%d", truncate(s), cpulist.MaxID)
	}
	return id, nil
}

// containerIDs collects the runtime IDs of the containers the pod's status reports as waiting or
// running; IDs that fail validation are skipped (the kubelet writes them, but nothing
// unvalidated may locate a cgroup).
func containerIDs(pod *corev1.Pod) map[cgroup.ContainerID]string {
	ids := map[cgroup.ContainerID]string{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, st := range list {
			if st.ContainerID == "" || st.State.Terminated != nil {
				continue
			}
			if id, err := cgroup.ParseContainerID(st.ContainerID); err == nil {
				ids[id] = st.Name
			}
		}
	}
	return ids
}

// truncate shortens untrusted text quoted in messages.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
