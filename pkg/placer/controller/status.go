package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Condition types and reasons of HPCJob status.
const (
	// ConditionValid is False with reason InvalidSpec when the spec cannot run as written.
	ConditionValid = "Valid"
	// ConditionScheduled is True once the gang is bound, False with a reason while it waits.
	ConditionScheduled = "Scheduled"

	ReasonValid         = "Valid"
	ReasonInvalidSpec   = "InvalidSpec"
	ReasonUnschedulable = "Unschedulable"
	ReasonGangTimeout   = "GangTimeout"
	ReasonBindFailed    = "BindFailed"
	ReasonScheduled     = "Scheduled"
	ReasonBound         = "GangBound"
	ReasonRescaled      = "Rescaled"
	ReasonCompleted     = "LauncherSucceeded"
	ReasonLauncherFail  = "LauncherFailed"
	ReasonLauncherGone  = "LauncherDeleted"
	// ReasonNotOwned: an object of a name the job needs exists and is not the job's.
	ReasonNotOwned = "ObjectNotOwned"
)

// fieldManager names the placer in managed fields.
const fieldManager = "finegrain-placer"

// decodeJob reads an HPCJob from the informer strictly, exactly as `placer plan` reads a file,
// so a spec the dry run rejects is rejected here with the same message. The returned job is
// nil only when the object cannot be read at all.
func decodeJob(u *unstructured.Unstructured) (*v1alpha1.HPCJob, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode HPCJob %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return v1alpha1.Decode(data, u.GetNamespace()+"/"+u.GetName())
}

// writtenStatus is the status this placer last wrote for one job object (by UID: a job deleted
// and created again under the same name starts afresh).
type writtenStatus struct {
	uid    types.UID
	status *v1alpha1.HPCJobStatus
}

// statusOf is the job's status as last written by this placer, else as the informer has it.
func (c *Controller) statusOf(key string, job *v1alpha1.HPCJob) *v1alpha1.HPCJobStatus {
	if w, ok := c.jobStatus[key]; ok && (job == nil || w.uid == job.UID) {
		return w.status.DeepCopy()
	}
	if job == nil {
		return &v1alpha1.HPCJobStatus{}
	}
	return job.Status.DeepCopy()
}

// writeStatus patches the job's status subresource and remembers what it wrote (the informer
// may show an older status for a while). The patch names the job object by UID: a job deleted and
// made again under its name never gets its predecessor's status (its placements would make the
// new job Running on workers it never had).
func (c *Controller) writeStatus(ctx context.Context, u *unstructured.Unstructured, st *v1alpha1.HPCJobStatus) {
	key := u.GetNamespace() + "/" + u.GetName()
	st.ObservedGeneration = u.GetGeneration()
	c.jobStatus[key] = writtenStatus{uid: u.GetUID(), status: st.DeepCopy()}
	c.vouch(u, st)
	patch, err := statusPatch(u.GetUID(), st)
	if err == nil {
		_, err = c.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(),
			types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	}
	if apierrors.IsNotFound(err) {
		delete(c.jobStatus, key)
		return
	}
	if err != nil {
		c.log.Warn("write HPCJob status failed; retrying", "job", key, "err", err)
		c.mu.Lock()
		c.dirtyJobs[key] = true
		c.mu.Unlock()
	}
}

// statusPatch is the JSON patch that makes the status of the job object uid st: it tests the
// object's UID, then sets the whole status, so that a field st leaves empty clears what an earlier
// status set (a job placed again loses its start time and placements).
func statusPatch(uid types.UID, st *v1alpha1.HPCJobStatus) ([]byte, error) {
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": uid},
		{"op": "add", "path": "/status", "value": st},
	})
}

// setCondition records a condition; it reports whether anything changed.
func setCondition(st *v1alpha1.HPCJobStatus, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(msg)})
}

// truncate keeps condition messages within the API's 32 KiB limit.
func truncate(s string) string { return truncateTo(s, 32*1024) }

// truncateTo cuts s to at most limit bytes, ending in "..." and never inside a UTF-8 sequence.
func truncateTo(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// What the placer did or tried, as events.k8s.io events name it (kube-scheduler's words).
const (
	actionBinding    = "Binding"
	actionScheduling = "Scheduling"
)

// eventNoteLimit is the longest note the events.k8s.io API accepts.
const eventNoteLimit = 1024

// event records an event on an object, warning when warn is set.
func (c *Controller) event(obj runtime.Object, warn bool, reason, format string, args ...any) {
	typ := corev1.EventTypeNormal
	if warn {
		typ = corev1.EventTypeWarning
	}
	action := actionScheduling
	switch reason {
	case ReasonScheduled, ReasonBound, ReasonBindFailed:
		action = actionBinding
	}
	c.recorder.Eventf(obj, nil, typ, reason, action, "%s", truncateTo(fmt.Sprintf(format, args...), eventNoteLimit))
}

func conditionMessage(st *v1alpha1.HPCJobStatus, typ string) string {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return c.Message
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }
