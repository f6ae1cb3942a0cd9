package controller

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// sent is one events.k8s.io event as the controller hands it to its recorder.
type sent struct {
	regarding                 runtime.Object
	typ, reason, action, note string
}

type noteRecorder struct{ events []sent }

func (r *noteRecorder) Eventf(regarding, _ runtime.Object, typ, reason, action, note string, args ...any) {
	r.events = append(r.events, sent{regarding, typ, reason, action, fmt.Sprintf(note, args...)})
}

// Every event carries the action events.k8s.io requires and a note within its 1 KiB limit,
// whatever the message (a gang's diagnosis lists every node), cut between characters.
func TestEventsFitTheEventsAPI(t *testing.T) {
	rec := &noteRecorder{}
	c := &Controller{recorder: rec}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "hpc"}}
	long := strings.Repeat("nœud n-1: 3 CPUs libres; ", 200)
	c.event(pod, false, ReasonScheduled, "Successfully assigned %s to %s", "hpc/w-0", "n1")
	c.event(pod, true, ReasonUnschedulable, "%s", long)
	c.event(pod, true, ReasonBindFailed, "%v", fmt.Errorf("conflict"))
	want := []struct{ typ, reason, action string }{
		{corev1.EventTypeNormal, ReasonScheduled, "Binding"},
		{corev1.EventTypeWarning, ReasonUnschedulable, "Scheduling"},
		{corev1.EventTypeWarning, ReasonBindFailed, "Binding"},
	}
	if len(rec.events) != len(want) {
		t.Fatalf("%d events recorded, want %d", len(rec.events), len(want))
	}
	for i, w := range want {
		e := rec.events[i]
		if e.regarding != pod || e.typ != w.typ || e.reason != w.reason || e.action != w.action {
			t.Errorf("event %d: %s %s %s, want %s %s %s about the pod", i, e.typ, e.reason, e.action, w.typ, w.reason, w.action)
		}
		if len(e.note) > eventNoteLimit || !utf8.ValidString(e.note) {
			t.Errorf("event %d: note of %d bytes (valid UTF-8: %v), the API takes at most %d", i, len(e.note), utf8.ValidString(e.note), eventNoteLimit)
		}
	}
	if n := rec.events[1].note; !strings.HasSuffix(n, "...") || !strings.HasPrefix(long, strings.TrimSuffix(n, "...")) {
		t.Errorf("long note not cut to a prefix ending in ...: %q", n)
	}
	if n := rec.events[0].note; n != "Successfully assigned hpc/w-0 to n1" {
		t.Errorf("short note changed: %q", n)
	}
}

func TestTruncateToKeepsCharactersWhole(t *testing.T) {
	for limit := 4; limit <= 12; limit++ {
		got := truncateTo("ééééééééé", limit)
		if len(got) > limit || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
			t.Errorf("truncateTo(é×9, %d) = %q (%d bytes)", limit, got, len(got))
		}
	}
	if got := truncateTo("short", 10); got != "short" {
		t.Errorf("truncateTo kept %q of a short string", got)
	}
}
