package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

func elastic(min, max int32) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) {
		s.Elastic = &v1alpha1.Elastic{MinReplicas: min, MaxReplicas: max, RescaleGapSeconds: 1}
	}
}

func (h *harness) hostfileLines(job string) int {
	cm, err := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), job+"-hostfile", metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return strings.Count(cm.Data["hostfile"], "\n")
}

// An elastic job starts with what fits and grows to its maximum when room appears.
func TestElasticExpands(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 9), hpcJob("el", 32, elastic(1, 4)))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "el") == v1alpha1.PhaseRunning })
	if s := h.job("hpc", "el").Status; s.Workers != 2 {
		t.Fatalf("started with %d workers, want the 2 that fit", s.Workers)
	}
	in := st.Uniform("n", 2, 2, 9, 64)
	h.create(in.Nodes[1])
	h.create(in.Topologies[1])
	h.eventually("expanded to 4", func() bool {
		b, _ := h.jobPodsOf("el")
		s := h.job("hpc", "el").Status
		return s.Workers == 4 && len(s.Placements) == 4 && b == 5 && h.hostfileLines("el") == 4
	})
	h.eventually("rescale counted", func() bool { return h.metric(h.c.metrics.Rescales.WithLabelValues("expand")) == 1 })
	s := h.job("hpc", "el").Status
	if s.LastRescaleTime == nil || len(s.Placements) != 4 || s.Nodes != 2 {
		t.Errorf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, ConditionScheduled); c == nil || c.Reason != ReasonRescaled || c.Message != "expanded from 2 to 4 workers" {
		t.Errorf("condition %+v", c)
	}
}

// A higher-priority gang that does not fit shrinks a lower-priority elastic job by just enough.
func TestElasticShrinksForPriority(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, elastic(1, 4)))...)
	h.eventually("elastic job at 4 workers", func() bool {
		return h.phase("hpc", "el") == v1alpha1.PhaseRunning && h.job("hpc", "el").Status.Workers == 4
	})
	h.createJob(hpcJob("urgent", 8, func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "urgent"
		s.Profile = v1alpha1.ProfileNetwork
	}))
	h.eventually("urgent running", func() bool { return h.phase("hpc", "urgent") == v1alpha1.PhaseRunning })
	s := h.job("hpc", "el").Status
	if s.Workers != 3 || len(s.Placements) != 3 || h.hostfileLines("el") != 3 {
		t.Errorf("elastic job after shrink: %d workers, %d placements, %d hostfile lines; want 3", s.Workers, len(s.Placements), h.hostfileLines("el"))
	}
	if c := meta.FindStatusCondition(s.Conditions, ConditionScheduled); c == nil ||
		c.Message != "shrunk from 4 to 3 workers so that HPCJob hpc/urgent (priority 10) fits" {
		t.Errorf("condition %+v", c)
	}
	if b, _ := h.jobPodsOf("el"); b != 4 {
		t.Errorf("elastic job has %d pods, want 3 workers and its launcher", b)
	}
	// A job of lower priority never shrinks it.
	h.createJob(hpcJob("meek", 8, func(s *v1alpha1.HPCJobSpec) { s.Priority = ptr.To[int32](-1) }))
	h.eventually("meek waits", func() bool { return h.rec.find("Warning Unschedulable meek") })
	if h.job("hpc", "el").Status.Workers != 3 {
		t.Error("a lower-priority job shrank the elastic job")
	}
}
