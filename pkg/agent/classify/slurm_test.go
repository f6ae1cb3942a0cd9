package classify

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/slurmbridge"
)

// The placeholder labels and container the agent reads are the ones the bridge writes.
func TestSlurmLabelsAreTheBridges(t *testing.T) {
	for _, c := range [][2]string{
		{LabelWorkload, slurmbridge.LabelWorkload}, {WorkloadSlurmJob, slurmbridge.WorkloadSlurmJob},
		{LabelSlurmJob, slurmbridge.LabelSlurmJob}, {PlaceholderContainer, slurmbridge.ContainerName},
	} {
		if c[0] != c[1] {
			t.Errorf("agent reads %q, the bridge writes %q", c[0], c[1])
		}
	}
}

const vcUID = "5d6e7f80-1111-4222-8333-944455556666"

func vcRef(name, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.VirtualClusterKind, Name: name, UID: types.UID(uid), Controller: &controller}
}

func slurmdPod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vc1-slurmd-n1", Namespace: "team", UID: podUID,
		Labels:          map[string]string{v1alpha1.LabelVirtualCluster: "vc1", v1alpha1.LabelRole: v1alpha1.RoleSlurmd},
		OwnerReferences: []metav1.OwnerReference{vcRef("vc1", vcUID, true)}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func placeholderPod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vc1-slurm-42-0", Namespace: "team", UID: podUID,
		Labels: map[string]string{v1alpha1.LabelVirtualCluster: "vc1", LabelWorkload: WorkloadSlurmJob, LabelSlurmJob: "42",
			LabelPinning: PinningExclusive},
		OwnerReferences: []metav1.OwnerReference{vcRef("vc1", vcUID, false)}},
		Spec: corev1.PodSpec{SchedulerName: DefaultPlacerSchedulerName}}
	if mod != nil {
		mod(p)
	}
	return p
}

// A slurmd pod and a placeholder are read only with a reference to the VirtualCluster their label
// names (a controller reference for slurmd), a placeholder only when the placer binds it and its
// job ID is a job ID: labels alone, which any pod author writes, make neither.
func TestSlurmRole(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want *SlurmRole
	}{
		{"slurmd", slurmdPod(nil), &SlurmRole{Cluster: "vc1", Owner: vcUID, Slurmd: true}},
		{"placeholder", placeholderPod(nil), &SlurmRole{Cluster: "vc1", Owner: vcUID, Job: 42}},
		{"placeholder with the controller reference too", placeholderPod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{vcRef("vc1", vcUID, true)}
		}), &SlurmRole{Cluster: "vc1", Owner: vcUID, Job: 42}},
		{"no virtual cluster label", slurmdPod(func(p *corev1.Pod) { delete(p.Labels, v1alpha1.LabelVirtualCluster) }), nil},
		{"slurmd labels without an owner", slurmdPod(func(p *corev1.Pod) { p.OwnerReferences = nil }), nil},
		{"slurmd owned by another virtual cluster", slurmdPod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{vcRef("vc2", vcUID, true)}
		}), nil},
		{"slurmd owned without a UID", slurmdPod(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{vcRef("vc1", "", true)} }), nil},
		{"slurmd referenced but not controlled", slurmdPod(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{vcRef("vc1", vcUID, false)} }), nil},
		{"slurmd owned by an object of another kind", slurmdPod(func(p *corev1.Pod) {
			p.OwnerReferences[0].Kind = "HPCJob"
		}), nil},
		{"slurmd owned by another API group", slurmdPod(func(p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion = "example.com/v1alpha1"
		}), nil},
		{"slurmctld", slurmdPod(func(p *corev1.Pod) { p.Labels[v1alpha1.LabelRole] = v1alpha1.RoleSlurmctld }), nil},
		{"placeholder of another scheduler", placeholderPod(func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }), nil},
		{"placeholder without an owner", placeholderPod(func(p *corev1.Pod) { p.OwnerReferences = nil }), nil},
		{"placeholder of job 0", placeholderPod(func(p *corev1.Pod) { p.Labels[LabelSlurmJob] = "0" }), nil},
		{"placeholder of a job that is no number", placeholderPod(func(p *corev1.Pod) { p.Labels[LabelSlurmJob] = "../42" }), nil},
		{"placeholder without its job", placeholderPod(func(p *corev1.Pod) { delete(p.Labels, LabelSlurmJob) }), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(c.pod, testCfg).Slurm
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("Slurm role (-want +got):\n%s", d)
			}
		})
	}
}
