package v1alpha1

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The CRD must serve exactly what this package reads and writes: the upstream group, names and
// version, and every JSON field of the spec and status (the API server prunes undeclared fields).
func TestCRDMatchesTheAPI(t *testing.T) {
	data, err := os.ReadFile("../../../../daemonset/crds/podgroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Metadata struct{ Name string }
		Spec     struct {
			Group string
			Scope string
			Names struct {
				Kind, Plural, Singular, ListKind string
				ShortNames                       []string
			}
			Versions []struct {
				Name         string
				Served       bool
				Storage      bool
				Subresources map[string]any
				Schema       struct {
					OpenAPIV3Schema schemaNode `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec
	if crd.Metadata.Name != Resource+"."+GroupName || s.Group != GroupName || s.Scope != "Namespaced" ||
		s.Names.Kind != Kind || s.Names.Plural != Resource || s.Names.ListKind != Kind+"List" {
		t.Errorf("CRD %s: group %s, scope %s, names %+v; want the upstream API's", crd.Metadata.Name, s.Group, s.Scope, s.Names)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != Version || !s.Versions[0].Served || !s.Versions[0].Storage {
		t.Fatalf("CRD versions %+v, want %s served and stored", s.Versions, Version)
	}
	if _, ok := s.Versions[0].Subresources["status"]; !ok {
		t.Error("the CRD has no status subresource: the placer patches podgroups/status")
	}
	root := s.Versions[0].Schema.OpenAPIV3Schema
	check(t, "spec", reflect.TypeFor[PodGroupSpec](), root.Properties["spec"])
	check(t, "status", reflect.TypeFor[PodGroupStatus](), root.Properties["status"])
}

type schemaNode struct {
	Properties map[string]schemaNode
}

func check(t *testing.T, path string, typ reflect.Type, s schemaNode) {
	t.Helper()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("%s.%s is a field of %s but not declared in the CRD's schema: the API server would prune it", path, name, typ.Name())
		}
	}
}

func TestGroupOf(t *testing.T) {
	pod := func(l map[string]string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	tests := []struct {
		labels     map[string]string
		name       string
		deprecated bool
		ok         bool
	}{
		{map[string]string{LabelPodGroup: "train"}, "train", false, true},
		{map[string]string{DeprecatedLabelPodGroup: "old"}, "old", true, true},
		{map[string]string{LabelPodGroup: "new", DeprecatedLabelPodGroup: "old"}, "new", false, true},
		{map[string]string{LabelPodGroup: ""}, "", false, false},
		{nil, "", false, false},
	}
	for _, tc := range tests {
		name, dep, ok := GroupOf(pod(tc.labels))
		if name != tc.name || dep != tc.deprecated || ok != tc.ok {
			t.Errorf("GroupOf(%v) = %q, %v, %v; want %q, %v, %v", tc.labels, name, dep, ok, tc.name, tc.deprecated, tc.ok)
		}
	}
}

func TestFromUnstructured(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": GroupName + "/" + Version, "kind": Kind,
			"metadata": map[string]any{"name": "train", "namespace": "ml"},
			"spec":     spec,
		}}
	}
	pg, err := FromUnstructured(obj(map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(30),
		"minResources": map[string]any{"cpu": "4", "memory": "1Gi"}}))
	if err != nil {
		t.Fatal(err)
	}
	if pg.Spec.MinMember != 3 || *pg.Spec.ScheduleTimeoutSeconds != 30 || pg.Spec.MinResources.Cpu().Value() != 4 || pg.Spec.MinResources.Memory().Value() != 1<<30 {
		t.Errorf("decoded %+v", pg.Spec)
	}
	bad := []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{}, "PodGroup ml/train is invalid: spec.minMember: Invalid value: 0: must be at least 1"},
		{map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(-1)}, "spec.scheduleTimeoutSeconds: Invalid value: -1: must not be negative"},
		{map[string]any{"minMember": int64(2), "minResources": map[string]any{"cpu": "-1"}}, "spec.minResources[cpu]: Invalid value: \"-1\": must not be negative"},
		{map[string]any{"minMember": "two"}, "PodGroup ml/train: "},
	}
	for _, tc := range bad {
		if _, err := FromUnstructured(obj(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("spec %v: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// scheduleTimeoutSeconds 0, which MPI Operator's scheduler-plugins gang option writes when the
// MPIJob gives no timeout, is a valid group that waits the placer's --gang-timeout, as unset does.
func TestTimeout(t *testing.T) {
	const def = 5 * time.Minute
	tests := []struct {
		seconds *int32
		want    time.Duration
	}{
		{nil, def},
		{ptr.To[int32](0), def},
		{ptr.To[int32](30), 30 * time.Second},
	}
	for _, tc := range tests {
		spec := PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: tc.seconds}
		if errs := Validate(&spec); len(errs) > 0 {
			t.Errorf("scheduleTimeoutSeconds %v: %v", ptr.Deref(tc.seconds, -1), errs.ToAggregate())
		}
		if got := spec.Timeout(def); got != tc.want {
			t.Errorf("scheduleTimeoutSeconds %v: Timeout %v, want %v", ptr.Deref(tc.seconds, -1), got, tc.want)
		}
	}
}

func TestPhaseOf(t *testing.T) {
	tests := []struct {
		c    Counts
		want Phase
	}{
		{Counts{}, PhasePending},
		{Counts{Bound: 3}, PhaseScheduling},
		{Counts{Bound: 3, Running: 2}, PhaseScheduling},
		{Counts{Bound: 3, Running: 3}, PhaseRunning},
		{Counts{Bound: 1, Running: 1, Succeeded: 2}, PhaseRunning},
		{Counts{Succeeded: 3}, PhaseFinished},
		{Counts{Bound: 2, Running: 2, Failed: 1}, PhaseFailed},
		{Counts{Bound: 1, Running: 1}, PhaseUnknown},
	}
	for _, tc := range tests {
		if got := PhaseOf(3, tc.c); got != tc.want {
			t.Errorf("PhaseOf(3, %+v) = %s, want %s", tc.c, got, tc.want)
		}
	}
}
