package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
)

// ReasonPriorityClassNotFound is the Scheduled=False reason of a job waiting for the
// PriorityClass it names.
const ReasonPriorityClassNotFound = "PriorityClassNotFound"

// ReasonNotAdmitted is the reason of the Warning event on a job for which no other job is shrunk
// because the API server would not admit its pods.
const ReasonNotAdmitted = "PodsNotAdmitted"

// priorityOf is a job's effective priority under the cluster's PriorityClasses (pkg/placer/priority).
func (c *Controller) priorityOf(job *v1alpha1.HPCJob) (int32, error) {
	pcs, err := c.classes.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list PriorityClasses: %w", err)
	}
	return priority.Of(&job.Spec, priority.FromClasses(pcs))
}

// claimOf is a queued gang as the shrink rule sees it: its namespace (from its key: "HPCJob
// ns/name", "pod group ns/name" or a lone pod's "ns/name") and priority.
func claimOf(e *queue.Entry) priority.Claim {
	key := strings.TrimPrefix(strings.TrimPrefix(e.Key, "HPCJob "), "pod group ")
	ns, _ := splitKey(key)
	return priority.Claim{Namespace: ns, Priority: e.Priority}
}

// admission is the outcome of a dry run of a job's pod, for the job object it was made for.
type admission struct {
	generation int64
	err        error
}

// podsAdmitted asks the API server whether the job's worker pods may be created in its
// namespace as the placer would make them, with a server-side dry run that runs every admission
// check (the Priority admission of its PriorityClass, ResourceQuotas scoped to that class, Pod
// Security Admission) and stores nothing. Before the placer takes workers from other jobs for a
// job, the job must pass it: a namespace may not gain by naming a PriorityClass it is not allowed
// to use. The answer is kept for the job's generation; a failure to ask is not kept.
func (c *Controller) podsAdmitted(ctx context.Context, job *v1alpha1.HPCJob) error {
	if a, ok := c.admissions[job.UID]; ok && a.generation == job.Generation {
		return a.err
	}
	pod := hpcjob.WorkerPod(job, hpcjob.NewWorker(job, 0, 1, 0), c.opts.SchedulerName)
	_, err := c.kube.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
	case isAdmissionRefusal(err):
		err = fmt.Errorf("the API server refuses the job's pods in namespace %s: %w", job.Namespace, err)
	default:
		return fmt.Errorf("ask the API server whether the job's pods may be created (dry run): %w", err)
	}
	c.admissions[job.UID] = admission{generation: job.Generation, err: err}
	return err
}

// forgetAdmission drops what is known of a job object that is gone.
func (c *Controller) forgetAdmission(uid types.UID) { delete(c.admissions, uid) }

// isAdmissionRefusal reports whether a create was refused for what it is (forbidden by an
// admission plugin or policy, or invalid), not for a failure to reach the API server.
func isAdmissionRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}
