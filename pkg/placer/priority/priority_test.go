package priority

import (
	"errors"
	"math"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func class(name string, value int32, def bool) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
}

func ptr(v int32) *int32 { return &v }

// Finding 1 of issue 21: spec.priority was a free int32, so a job in any namespace could put
// itself above every other. It now only lowers what the job's class gives.
func TestOf(t *testing.T) {
	none := FromClasses(nil)
	classes := FromClasses([]*schedulingv1.PriorityClass{class("batch", 100, true), class("urgent", 1000, false), class("low", -10, false)})
	for _, tc := range []struct {
		name    string
		classes Classes
		spec    v1alpha1.HPCJobSpec
		want    int32
		missing string
	}{
		{"self-assigned maximum without classes", none, v1alpha1.HPCJobSpec{Priority: ptr(math.MaxInt32)}, 0, ""},
		{"nothing set, no default class", none, v1alpha1.HPCJobSpec{}, 0, ""},
		{"lowered below 0", none, v1alpha1.HPCJobSpec{Priority: ptr(-5)}, -5, ""},
		{"default class", classes, v1alpha1.HPCJobSpec{}, 100, ""},
		{"self-assigned maximum takes the default class", classes, v1alpha1.HPCJobSpec{Priority: ptr(math.MaxInt32)}, 100, ""},
		{"named class", classes, v1alpha1.HPCJobSpec{PriorityClassName: "urgent"}, 1000, ""},
		{"named class lowered", classes, v1alpha1.HPCJobSpec{PriorityClassName: "urgent", Priority: ptr(500)}, 500, ""},
		{"named class below the default", classes, v1alpha1.HPCJobSpec{PriorityClassName: "low"}, -10, ""},
		{"missing class counts as unnamed", classes, v1alpha1.HPCJobSpec{PriorityClassName: "gold", Priority: ptr(math.MaxInt32)}, 100, "gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Of(&tc.spec, tc.classes)
			if got != tc.want {
				t.Errorf("priority %d, want %d", got, tc.want)
			}
			var nf *NotFoundError
			switch {
			case tc.missing == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.missing != "" && (!errors.As(err, &nf) || nf.Class != tc.missing):
				t.Errorf("error %v, want class %q not found", err, tc.missing)
			}
		})
	}
}

func TestFromClassesDefault(t *testing.T) {
	s := FromClasses([]*schedulingv1.PriorityClass{class("b", 50, true), class("a", 50, true), class("c", 10, true), class("d", 5, false)})
	if name, v, ok := s.Default(); !ok || name != "c" || v != 10 {
		t.Errorf("default %q %d %v, want the lowest of the globalDefault classes, c (10)", name, v, ok)
	}
	s = FromClasses([]*schedulingv1.PriorityClass{class("b", 50, true), class("a", 50, true)})
	if name, _, _ := s.Default(); name != "a" {
		t.Errorf("default %q, want a (equal values: first by name)", name)
	}
}

// Finding 1 of issue 21: a team-a job of any priority shrank team-b's elastic job. Only strictly
// higher priority shrinks, and ScopeNamespace keeps it within a namespace.
func TestMayShrink(t *testing.T) {
	a10, a5, b5, b10 := Claim{"team-a", 10}, Claim{"team-a", 5}, Claim{"team-b", 5}, Claim{"team-b", 10}
	for _, tc := range []struct {
		scope             Scope
		beneficiary, prey Claim
		want              bool
	}{
		{ScopeCluster, a10, b5, true},
		{ScopeCluster, a10, b10, false},
		{ScopeCluster, a5, b10, false},
		{ScopeNamespace, a10, b5, false},
		{ScopeNamespace, a10, a5, true},
		{ScopeNone, a10, a5, false},
	} {
		if got := tc.scope.MayShrink(tc.beneficiary, tc.prey); got != tc.want {
			t.Errorf("%s: %+v shrinks %+v = %v, want %v", tc.scope, tc.beneficiary, tc.prey, got, tc.want)
		}
	}
	if _, err := ParseScope("everyone"); err == nil {
		t.Error("ParseScope accepted an unknown scope")
	}
}
