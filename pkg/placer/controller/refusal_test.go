package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// The placer reads the agent's refusal events by the agent's own reason.
func TestAgentRefusalReasonIsTheAgents(t *testing.T) {
	if ReasonAgentRefused != agent.ReasonPinFailed {
		t.Errorf("ReasonAgentRefused = %q, the node agent reports %q", ReasonAgentRefused, agent.ReasonPinFailed)
	}
}

// refuse records the event the node agent writes when it cannot pin a pod's container.
func (h *harness) refuse(ns, pod string, uid types.UID) {
	h.t.Helper()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", pod, time.Now().UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod, UID: uid},
		Reason:         ReasonAgentRefused,
		Type:           corev1.EventTypeWarning,
		Message:        `container "worker" runs in the shared pool until 8 exclusive CPUs fit: it would shrink the shared pool below its minimum of 1`,
		Source:         corev1.EventSource{Component: "finegrain-nodeagent"},
	}
	if _, err := h.kube.CoreV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// patchedStatus reports whether some status patch sent to the API server satisfies ok (fields the
// patch leaves out are nil: it sets the whole status).
func (h *harness) patchedStatus(ok func(status map[string]any) bool) bool {
	for _, a := range h.dyn.Actions() {
		p, isPatch := a.(k8stesting.PatchAction)
		if !isPatch || p.GetSubresource() != "status" {
			continue
		}
		var ops []struct {
			Path  string
			Value json.RawMessage
		}
		if json.Unmarshal(p.GetPatch(), &ops) != nil {
			continue
		}
		for _, op := range ops {
			var status map[string]any
			if op.Path == "/status" && json.Unmarshal(op.Value, &status) == nil && ok(status) {
				return true
			}
		}
	}
	return false
}

func (h *harness) pod(ns, name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// A bound worker the node agent refuses to pin does not sit in the shared pool for good: after
// the grace the job gets a PinRefused condition, its pods are deleted and it is placed again.
func TestRefusedWorkerReplansTheJob(t *testing.T) {
	opts := testOptions()
	opts.RefusalGrace = 50 * time.Millisecond
	h := newHarness(t, opts, append(cluster(2, 9), hpcJob("j", 16, nil))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	first := h.job("hpc", "j").Status.StartTime
	worker := h.pod("hpc", "j-worker-0")

	// An event about an earlier pod of the same name changes nothing.
	h.refuse("hpc", "j-worker-0", "uid-of-an-earlier-pod")
	h.never("a stale refusal replanned the job", 300*time.Millisecond, func() bool { return h.rec.find("PinRefused") })

	h.refuse("hpc", "j-worker-0", worker.UID)
	// The job may be placed again at once, so the condition is looked for among the status
	// writes rather than in the job's current status.
	var msg string
	h.eventually("PinRefused condition", func() bool {
		return h.patchedStatus(func(s map[string]any) bool {
			conds, _ := s["conditions"].([]any)
			for _, c := range conds {
				if c, _ := c.(map[string]any); c["type"] == ConditionScheduled && c["reason"] == ReasonPinRefused {
					msg, _ = c["message"].(string)
					return true
				}
			}
			return false
		})
	})
	for _, want := range []string{"the node agent on " + worker.Spec.NodeName + " refused to pin worker j-worker-0", "shrink the shared pool", "placed again (refusal 1)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q lacks %q", msg, want)
		}
	}
	if !h.patchedStatus(func(s map[string]any) bool {
		return s["phase"] == string(v1alpha1.PhasePending) && s["startTime"] == nil && s["placements"] == nil
	}) {
		t.Error("no status write set the job Pending and cleared its start time and placements")
	}
	if !h.rec.find("Warning PinRefused j: the node agent on") {
		t.Errorf("no PinRefused event on the job; events:\n%s", h.rec.all())
	}
	// Placed again after the back-off: running, bound whole, with a new start time.
	h.eventually("job running again", func() bool {
		s := h.job("hpc", "j").Status
		return s.Phase == v1alpha1.PhaseRunning && meta.IsStatusConditionTrue(s.Conditions, ConditionScheduled)
	})
	if b, p := h.jobPodsOf("j"); b != 3 || p != 0 {
		t.Errorf("after the replan: %d bound, %d pending; want 2 workers and the launcher bound", b, p)
	}
	if s := h.job("hpc", "j").Status; s.StartTime == nil || s.StartTime.Before(first) || len(s.Placements) != 2 {
		t.Errorf("after the replan: start %v (first %v), placements %v", s.StartTime, first, s.Placements)
	}
	if got := h.metric(h.c.metrics.GangFailures.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused gang failures %v, want 1", got)
	}
	if h.c.queue.Len() != 0 {
		t.Errorf("queue %v after the job is running again", h.c.queue.Keys())
	}
}

// A refusal the agent got over within the grace (the pod is in its node's pins by then, beside
// a malformed entry that must not hide it) and a refusal of a pod that is not an HPCJob worker
// leave everything as it is.
func TestRefusalPinnedWithinGraceIsIgnored(t *testing.T) {
	opts := testOptions()
	opts.RefusalGrace = 200 * time.Millisecond
	h := newHarness(t, opts, append(cluster(1, 9), hpcJob("j", 4, func(s *v1alpha1.HPCJobSpec) { s.Profile = v1alpha1.ProfileNetwork }))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	worker := h.pod("hpc", "j-worker-0")
	h.refuse("hpc", "j-worker-0", worker.UID)
	pinned := st.NRT(worker.Spec.NodeName, 2, st.Zone{Free: "4-8", Available: -1, Pins: "hpc/gone=9;hpc/j-worker-0/worker=0-3"}, st.Zone{Free: "9-17", Available: -1})
	if _, err := h.dyn.Resource(nrt.GroupVersionResource).Update(context.Background(), pinned, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refuse("hpc", "j-launcher", h.pod("hpc", "j-launcher").UID)
	h.never("the job was placed again", time.Second, func() bool { return h.rec.find("PinRefused") })
	if h.phase("hpc", "j") != v1alpha1.PhaseRunning || h.pod("hpc", "j-worker-0").UID != worker.UID {
		t.Errorf("job %s, worker replaced", h.phase("hpc", "j"))
	}
}
