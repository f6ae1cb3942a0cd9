package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	if h := s.History; h != nil {
		c := *h
		c.Samples = make([]resource.Quantity, len(h.Samples))
		for i := range h.Samples {
			c.Samples[i] = h.Samples[i].DeepCopy()
		}
		if h.NeededCPU != nil {
			q := h.NeededCPU.DeepCopy()
			c.NeededCPU = &q
		}
		out.History = &c
	}
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return &out
}
