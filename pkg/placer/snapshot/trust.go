package snapshot

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// What the snapshot believes of a pod's labels and annotations. Any namespace user can write a
// pod that claims to be an HPC job's worker (finegrain.dev/job and /role labels), to fence other
// jobs off its node (finegrain.dev/exclusive-nodes) or to sit on a NUMA node the placer chose
// (finegrain.dev/numa-node), and have another scheduler, or a nodeName of its own, put it on any
// node. A pod counts as an HPC job's worker, with that job's fence, and its NUMA node annotation
// counts, only when the placer vouches for it:
//   - a pod the placer placed itself and still assumes (Input.Own, Cache.SetAssumed, Reserve);
//   - a worker of an HPCJob: controlled (ownerReference with controller set) by the HPCJob its
//     label names, with the UID of the job object the placer knows, and listed among the job's
//     workers on its node (JobRecord: the job's status placements and the bindings under way,
//     which only the placer writes). Its fence is the job's spec.exclusiveNodes, whatever the
//     pod's annotation says;
//   - a pod that names the placer as its scheduler (a member of a plain pod group, or a lone pod):
//     the placer bound it, or its author made it bound to a node in the placer's name, which the
//     finegrain-placer-pods ValidatingAdmissionPolicy (daemonset/policy) lets only the placer do.
// Every other pod is foreign: its requests, host ports and pinned cores count on its node as they
// must, but it is in no job and its NUMA node is the agent's choice.

// JobRecord is what the placer vouches for of one HPCJob object.
type JobRecord struct {
	// UID is the job object's.
	UID types.UID
	// Exclusive is the job's spec.exclusiveNodes.
	Exclusive bool
	// Workers maps the name of each worker pod the placer bound for the job to its node.
	Workers map[string]string
}

func (r JobRecord) equal(o JobRecord) bool {
	return r.UID == o.UID && r.Exclusive == o.Exclusive && maps.Equal(r.Workers, o.Workers)
}

// RecordOf is the record of an HPCJob as its status shows it (the placements of bindings under
// way are the controller's to add).
func RecordOf(job *v1alpha1.HPCJob) JobRecord {
	r := JobRecord{UID: job.UID, Exclusive: job.Spec.ExclusiveNodes, Workers: make(map[string]string, len(job.Status.Placements))}
	for _, pl := range job.Status.Placements {
		r.Workers[pl.Worker] = pl.Node
	}
	return r
}

// trust is what vouches for the pods of a snapshot: the placer's scheduler name and its HPCJobs
// by "namespace/name".
type trust struct {
	schedulerName string
	jobs          map[string]JobRecord
}

// hpcJobKind is the group and kind of an HPCJob, as an ownerReference names it.
var hpcJobKind = v1alpha1.GroupVersion.WithKind(v1alpha1.Kind).GroupKind()

// vouch returns the HPC job a pod is a worker of and whether its NUMA node annotation counts, as
// far as the placer vouches for the pod; t nil vouches for everything the pod claims (a pod the
// placer placed itself).
func (t *trust) vouch(p *corev1.Pod) (job JobOnNode, hasJob, hint bool) {
	if t == nil {
		job, hasJob = JobOf(p)
		return job, hasJob, true
	}
	if name := p.Labels[v1alpha1.LabelJob]; name != "" {
		rec, ok := t.jobs[p.Namespace+"/"+name]
		if !ok || p.Labels[v1alpha1.LabelRole] != v1alpha1.RoleWorker || !controlledByJob(p, name, rec.UID) {
			return JobOnNode{}, false, false
		}
		if node, placed := rec.Workers[p.Name]; !placed || node != p.Spec.NodeName {
			return JobOnNode{}, false, false
		}
		return JobOnNode{Key: HPCJobKey(p.Namespace, name), Exclusive: rec.Exclusive}, true, true
	}
	if t.schedulerName == "" || p.Spec.SchedulerName != t.schedulerName {
		return JobOnNode{}, false, false
	}
	job, hasJob = JobOf(p)
	return job, hasJob, true
}

// controlledByJob reports whether the HPCJob name, of the given UID, is the pod's controller.
func controlledByJob(p *corev1.Pod, name string, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || uid == "" || ref.UID != uid || ref.Name != name || ref.Kind != hpcJobKind.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == hpcJobKind.Group
}
