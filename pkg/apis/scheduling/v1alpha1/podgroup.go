// Package v1alpha1 declares the PodGroup of scheduling.x-k8s.io/v1alpha1, the gang object of
// Kubernetes' scheduler-plugins (its Coscheduling plugin), as the placer reads and reports it: the
// spec a user writes (minMember, minResources, scheduleTimeoutSeconds), the status phases the
// placer writes, which pod belongs to which group (the label scheduling.x-k8s.io/pod-group, and
// finegrain's older pod-group.scheduling.x-k8s.io/name), and the group's validation. The JSON keys
// are the upstream API's, so one PodGroup serves either scheduler and one CRD
// (daemonset/crds/podgroup.yaml) serves both. This package must not talk to the API server or
// decide placements.
package v1alpha1

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	finegrain "github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// API coordinates of the PodGroup resource.
const (
	GroupName = "scheduling.x-k8s.io"
	Version   = "v1alpha1"
	Kind      = "PodGroup"
	Resource  = "podgroups"
)

// GroupVersionResource addresses PodGroups through the dynamic client.
var GroupVersionResource = schema.GroupVersionResource{Group: GroupName, Version: Version, Resource: Resource}

// LabelPodGroup names the PodGroup (in the pod's namespace) a pod belongs to.
const LabelPodGroup = GroupName + "/pod-group"

// DeprecatedLabelPodGroup is finegrain's older gang label; its groups take their size from
// finegrain.LabelPodGroupMinAvailable instead of a PodGroup.
const DeprecatedLabelPodGroup = finegrain.LabelPodGroup

// PodGroup is a gang of plain pods: none of them is bound until MinMember of them fit together.
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodGroupSpec   `json:"spec,omitempty"`
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec is what the user asks for.
type PodGroupSpec struct {
	// MinMember is how many of the group's pods (bound ones included) must fit together before
	// any is bound.
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources, when set, is what the cluster must have free (requests of the group's bound
	// pods included) before the group is tried at all.
	MinResources corev1.ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds is how long the group may wait for its gang to fit before it is
	// reported timed out; unset or 0, the placer's --gang-timeout (Timeout).
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// Timeout is how long the group may wait for its gang to fit: scheduleTimeoutSeconds, or def
// (the placer's --gang-timeout) when it is unset or 0. MPI Operator's scheduler-plugins gang
// option writes 0 into every PodGroup whose MPIJob's schedulingPolicy gives no timeout, meaning
// none was chosen; a gang the placer binds all at once has no use for a wait of no time.
func (s *PodGroupSpec) Timeout(def time.Duration) time.Duration {
	if t := s.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		return time.Duration(*t) * time.Second
	}
	return def
}

// Phase is where a pod group is in its life, in the upstream API's words.
type Phase string

// Pod group phases.
const (
	// PhasePending: fewer than minMember pods are bound (the gang waits to fit or for its pods).
	PhasePending Phase = "Pending"
	// PhaseScheduling: minMember pods are bound, fewer than minMember run.
	PhaseScheduling Phase = "Scheduling"
	// PhaseRunning: minMember pods run (or have succeeded).
	PhaseRunning Phase = "Running"
	// PhaseUnknown: some pods are bound but fewer than minMember are left (pods were deleted).
	PhaseUnknown Phase = "Unknown"
	// PhaseFinished: minMember pods have succeeded.
	PhaseFinished Phase = "Finished"
	// PhaseFailed: a pod of the group has failed.
	PhaseFailed Phase = "Failed"
)

// PodGroupStatus is what the placer reports.
type PodGroupStatus struct {
	Phase Phase `json:"phase,omitempty"`
	// OccupiedBy is the workload that owns the group; the placer leaves it to that workload.
	OccupiedBy string `json:"occupiedBy,omitempty"`
	// Running, Succeeded and Failed count the group's pods in those pod phases.
	Running   int32 `json:"running,omitempty"`
	Succeeded int32 `json:"succeeded,omitempty"`
	Failed    int32 `json:"failed,omitempty"`
	// ScheduleStartTime is when the placer first tried the group.
	ScheduleStartTime *metav1.Time `json:"scheduleStartTime,omitempty"`
}

// GroupOf returns the pod group a pod belongs to: the value of LabelPodGroup, else of
// DeprecatedLabelPodGroup (deprecated is then true); ok is false for a pod of no group.
func GroupOf(pod *corev1.Pod) (name string, deprecated, ok bool) {
	if g := pod.Labels[LabelPodGroup]; g != "" {
		return g, false, true
	}
	if g := pod.Labels[DeprecatedLabelPodGroup]; g != "" {
		return g, true, true
	}
	return "", false, false
}

// FromUnstructured converts and validates a PodGroup the API server returned. The error names the
// group and every problem.
func FromUnstructured(u *unstructured.Unstructured) (*PodGroup, error) {
	var pg PodGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &pg); err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if errs := Validate(&pg.Spec); len(errs) > 0 {
		return nil, fmt.Errorf("PodGroup %s/%s is invalid: %w", pg.Namespace, pg.Name, errs.ToAggregate())
	}
	return &pg, nil
}

// Validate checks a PodGroup's spec as the placer needs it.
func Validate(spec *PodGroupSpec) field.ErrorList {
	sp := field.NewPath("spec")
	var errs field.ErrorList
	if spec.MinMember < 1 {
		errs = append(errs, field.Invalid(sp.Child("minMember"), spec.MinMember,
			"must be at least 1: the number of the group's pods that must fit together"))
	}
	if t := spec.ScheduleTimeoutSeconds; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(sp.Child("scheduleTimeoutSeconds"), *t, "must not be negative: give the seconds the gang may wait, or 0 or nothing for the placer's --gang-timeout"))
	}
	for name, q := range spec.MinResources {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(sp.Child("minResources").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

// Counts are a pod group's pods by what they are doing.
type Counts struct {
	// Bound counts the pods bound to a node that have not terminated.
	Bound int32
	// Running, Succeeded and Failed count pods in those pod phases.
	Running, Succeeded, Failed int32
}

// PhaseOf is the phase of a group of minMember with these pods.
func PhaseOf(minMember int32, c Counts) Phase {
	switch {
	case c.Failed > 0:
		return PhaseFailed
	case c.Succeeded >= minMember:
		return PhaseFinished
	case c.Running+c.Succeeded >= minMember:
		return PhaseRunning
	case c.Bound+c.Succeeded >= minMember:
		return PhaseScheduling
	case c.Bound > 0 || c.Succeeded > 0:
		return PhaseUnknown
	default:
		return PhasePending
	}
}
