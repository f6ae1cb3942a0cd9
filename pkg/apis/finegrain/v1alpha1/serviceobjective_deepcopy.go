package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeepCopy copies a ServiceObjective status (hand-written, like HPCJobStatus.DeepCopy: the loop
// keeps the last status it wrote and edits copies of it).
func (s *ServiceObjectiveStatus) DeepCopy() *ServiceObjectiveStatus {
	out := *s
	if s.PodSize != nil {
		out.PodSize = &PodSize{CPU: s.PodSize.CPU.DeepCopy(), Memory: s.PodSize.Memory.DeepCopy(), IOBandwidth: s.PodSize.IOBandwidth.DeepCopy()}
	}
	if s.LastMeasurement != nil {
		q := s.LastMeasurement.DeepCopy()
		out.LastMeasurement = &q
	}
	if s.Smoothed != nil {
		q := s.Smoothed.DeepCopy()
		out.Smoothed = &q
	}
	out.LastMeasurementTime = s.LastMeasurementTime.DeepCopy()
	out.LastResizeTime = s.LastResizeTime.DeepCopy()
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return &out
}
