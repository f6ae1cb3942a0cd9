package controller

import (
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// A launcher that runs as a worker is created bound with the NUMA node of its exclusive cores
// annotated, and is pinned (the label), beside one worker fewer.
func TestLauncherRunsAsWorker(t *testing.T) {
	job := hpcJob("lw", 8, func(s *v1alpha1.HPCJobSpec) { s.SlotsPerWorker, s.RunLauncherAsWorker = 4, true })
	h := newHarness(t, testOptions(), append(cluster(1, 8), job)...)
	h.eventually("the job running", func() bool { return h.phase("hpc", "lw") == v1alpha1.PhaseRunning })
	h.eventually("the launcher created", func() bool {
		for _, p := range h.pods("hpc") {
			if p.Name == v1alpha1.LauncherName("lw") {
				return true
			}
		}
		return false
	})
	workers := 0
	for _, p := range h.pods("hpc") {
		switch p.Labels[v1alpha1.LabelRole] {
		case v1alpha1.RoleWorker:
			workers++
		case v1alpha1.RoleLauncher:
			if p.Spec.NodeName == "" || p.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive {
				t.Errorf("launcher bound to %q, labels %v; want bound and pinned", p.Spec.NodeName, p.Labels)
			}
			if a := p.Annotations[v1alpha1.AnnotationNUMANode]; a != "0" && a != "1" {
				t.Errorf("launcher NUMA annotation %q, want the placer's choice", a)
			}
		}
	}
	if workers != 1 {
		t.Errorf("%d workers, want 1 (8 tasks of 4 slots, the launcher running 4)", workers)
	}
	if st := h.job("hpc", "lw").Status; st.Workers != 1 {
		t.Errorf("status workers %d, want 1", st.Workers)
	}
}
