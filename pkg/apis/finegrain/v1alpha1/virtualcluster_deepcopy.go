package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeepCopy copies a VirtualCluster status (hand-written, like HPCJobStatus.DeepCopy: the
// controller compares the status it computes with the last one and edits copies).
func (s *VirtualClusterStatus) DeepCopy() *VirtualClusterStatus {
	out := *s
	if s.Ports != nil {
		p := *s.Ports
		out.Ports = &p
	}
	out.Nodes = append([]VirtualClusterNode(nil), s.Nodes...)
	out.Jobs = append([]SlurmJob(nil), s.Jobs...)
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return &out
}
