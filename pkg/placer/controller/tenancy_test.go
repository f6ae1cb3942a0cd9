package controller

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
)

// Tests of issue 21: what one tenant (a namespace user) must not do to another through the placer.

// inNamespace moves a job to another namespace.
func inNamespace(ns string, u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetNamespace(ns)
	return u
}

// shrinkScene runs team-b's elastic job at its maximum of 4 workers on two nodes that then have
// no room left for team-a's 8-task network job.
func shrinkScene(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	h := newHarness(t, opts, append(append(cluster(2, 9), objs...), inNamespace("team-b", hpcJob("el", 32, elastic(1, 4))))...)
	h.eventually("team-b's elastic job at 4 workers", func() bool {
		return h.phase("team-b", "el") == v1alpha1.PhaseRunning && h.job("team-b", "el").Status.Workers == 4
	})
	return h
}

func network(mutate func(*v1alpha1.HPCJobSpec)) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) {
		s.Profile = v1alpha1.ProfileNetwork
		mutate(s)
	}
}

// Finding 1: an HPCJob in team-a with priority 2147483647 shrank team-b's elastic job. Without a
// PriorityClass that lets it, a self-assigned priority counts as 0 and shrinks nothing.
func TestSelfAssignedPriorityShrinksNothing(t *testing.T) {
	h := shrinkScene(t, testOptions())
	h.createJob(inNamespace("team-a", hpcJob("greedy", 8, network(func(s *v1alpha1.HPCJobSpec) { s.Priority = ptr.To[int32](math.MaxInt32) }))))
	h.eventually("greedy waits", func() bool { return h.rec.find("Warning Unschedulable greedy") })
	h.never("team-b's job was shrunk", 300*time.Millisecond, func() bool { return h.job("team-b", "el").Status.Workers != 4 })
}

// A PriorityClass lifts a job, but under --shrink-scope=namespace only over its own namespace.
func TestShrinkScopeNamespace(t *testing.T) {
	opts := testOptions()
	opts.ShrinkScope = priority.ScopeNamespace
	h := shrinkScene(t, opts, priorityClass("urgent", 1000, false))
	h.createJob(inNamespace("team-a", hpcJob("urgent", 8, network(withClass("urgent")))))
	h.eventually("urgent waits", func() bool { return h.rec.find("Warning Unschedulable urgent") })
	h.never("team-b's job was shrunk across namespaces", 300*time.Millisecond, func() bool { return h.job("team-b", "el").Status.Workers != 4 })
	h.createJob(inNamespace("team-b", hpcJob("own", 8, network(withClass("urgent")))))
	h.eventually("team-b's own urgent job shrinks it", func() bool { return h.phase("team-b", "own") == v1alpha1.PhaseRunning })
}

// A class the namespace may not use (the API server refuses its pods: here a PriorityClass quota)
// shrinks nothing, and the job says why.
func TestShrinkNeedsAdmittedPods(t *testing.T) {
	h := shrinkScene(t, testOptions(), priorityClass("urgent", 1000, false))
	h.mu.Lock()
	h.admit = func(p *corev1.Pod) error {
		if p.Namespace == "team-a" && p.Spec.PriorityClassName == "urgent" {
			return apierrors.NewForbidden(podsGVR.GroupResource(), p.Name, errFakeQuota)
		}
		return nil
	}
	h.mu.Unlock()
	h.createJob(inNamespace("team-a", hpcJob("urgent", 8, network(withClass("urgent")))))
	h.eventually("urgent told why nothing shrinks", func() bool { return h.rec.find("Warning " + ReasonNotAdmitted + " urgent") })
	if h.job("team-b", "el").Status.Workers != 4 {
		t.Error("team-b's job was shrunk for a job whose pods the API server refuses")
	}
	if !strings.Contains(h.rec.all(), errFakeQuota.Error()) {
		t.Errorf("events do not quote the API server's refusal:\n%s", h.rec.all())
	}
}

// A job naming a class that does not exist waits, saying so, and is placed once it exists.
func TestMissingPriorityClass(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 9), hpcJob("gold", 2, withClass("gold")))...)
	h.eventually("gold waits for its class", func() bool {
		c := h.condition("hpc", "gold", ConditionScheduled)
		return c != nil && c.Reason == ReasonPriorityClassNotFound && strings.Contains(c.Message, `PriorityClass "gold" does not exist`)
	})
	h.create(priorityClass("gold", 5, false))
	h.eventually("gold placed", func() bool { return h.phase("hpc", "gold") == v1alpha1.PhaseRunning })
	if p := h.pod("hpc", "gold-worker-0"); p.Spec.PriorityClassName != "gold" {
		t.Errorf("worker's priorityClassName %q, want the job's", p.Spec.PriorityClassName)
	}
}

var errFakeQuota = errors.New(`insufficient quota to match these scopes: [{PriorityClass In [urgent]}]`)
