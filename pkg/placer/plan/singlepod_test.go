package plan

import (
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// A lone pod — a replica of a Deployment a ServiceObjective scales — takes its tie-break from
// its placement annotation, as a pod gang does, and lands on the node the policy picks.
func TestSinglePodPlacement(t *testing.T) {
	for _, tc := range []struct {
		placement string
		want      Policy
		node      string
	}{
		{"", LeastLoaded, "n-0001"},
		{"least-loaded", LeastLoaded, "n-0001"},
		{"most-loaded", MostLoaded, "n-0000"},
		{"packed", LeastLoaded, "n-0001"},
	} {
		in := st.Uniform("n", 2, 1, 8, 64)
		in.Pods = append(in.Pods, st.Pod("web", "busy", "n-0000", "2", "1Gi", false))
		p := st.Pod("web", "web-1", "", "1", "1Gi", false)
		if tc.placement != "" {
			p.Annotations = map[string]string{v1alpha1.AnnotationPlacement: tc.placement}
		}
		g := SinglePod(p)
		if g.Policy != tc.want {
			t.Errorf("placement %q: policy %v, want %v", tc.placement, g.Policy, tc.want)
		}
		res, err := Plan(snapshot.Build(in), g)
		if err != nil {
			t.Fatalf("placement %q: %v", tc.placement, err)
		}
		if got := res.Placements[0].Node; got != tc.node {
			t.Errorf("placement %q: pod on %s, want %s (n-0000 has 2 of 8 CPUs requested)", tc.placement, got, tc.node)
		}
	}
}
