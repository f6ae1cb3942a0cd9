package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeepCopy copies a status (hand-written: the placer keeps the last status it wrote and edits
// copies of it).
func (s *HPCJobStatus) DeepCopy() *HPCJobStatus {
	out := *s
	out.Placements = slices.Clone(s.Placements)
	out.Conditions = make([]metav1.Condition, len(s.Conditions))
	for i := range s.Conditions {
		s.Conditions[i].DeepCopyInto(&out.Conditions[i])
	}
	if s.Conditions == nil {
		out.Conditions = nil
	}
	out.SubmitTime = s.SubmitTime.DeepCopy()
	out.StartTime = s.StartTime.DeepCopy()
	out.CompletionTime = s.CompletionTime.DeepCopy()
	out.LastRescaleTime = s.LastRescaleTime.DeepCopy()
	out.LauncherCreationTime = s.LauncherCreationTime.DeepCopy()
	return &out
}
