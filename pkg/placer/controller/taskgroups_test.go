package controller

import (
	"fmt"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Options.TaskGroups reaches the plans the controller binds: a scale job under most-loaded keeps
// its four task groups on four nodes with task groups on, and with them off its four workers all
// go to the most loaded node that fits them.
func TestTaskGroupsOption(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("task-groups=%v", on), func(t *testing.T) {
			opts := testOptions()
			opts.TaskGroups = on
			h := newHarness(t, opts, cluster(4, 18)...)
			h.createJob(hpcJob("j", 16, func(s *v1alpha1.HPCJobSpec) { s.Placement = v1alpha1.MostLoaded }))
			h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
			nodes := map[string]int{}
			for _, p := range h.pods("hpc") {
				if p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker {
					nodes[p.Spec.NodeName]++
				}
			}
			want := 4
			if !on {
				want = 1
			}
			if s := h.job("hpc", "j").Status; s.Workers != 4 || s.Groups != 4 || len(nodes) != want {
				t.Errorf("%d workers in %d groups on nodes %v, want %d nodes", s.Workers, s.Groups, nodes, want)
			}
		})
	}
}
