package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
)

// Finding 6 of issue 21: a pod created with nodeName, schedulerName finegrain-placer and
// finegrain.dev/numa-node "1" had its hint honoured, although the placer never bound it. Nothing
// in the pod tells it from the placer's own workers (created bound, with the hint); only admission
// sees who wrote it. The agent honours hints only while the policy that keeps them to the placer
// is in force, and ignores them, saying why, while it is not.
func TestNUMAHintNeedsThePolicy(t *testing.T) {
	var missing atomic.Bool
	missing.Store(true)
	guard := func(context.Context) error {
		if missing.Load() {
			return errors.New("the ValidatingAdmissionPolicyBinding finegrain-placer-pods that lets only the placer write the hint does not exist")
		}
		return nil
	}
	e := newEnv(t, envOpts{hintGuard: guard})
	e.start()
	forged := newPod("forged", exclusiveLabel, "2")
	forged.Spec.SchedulerName = classify.DefaultPlacerSchedulerName
	forged.Annotations = map[string]string{classify.AnnotationNUMANode: "1"}
	e.apply(forged)
	rep := e.a.DrainPods(context.Background())
	if len(rep.Allocated) != 1 || rep.Allocated[0].NUMANode != 0 {
		t.Fatalf("forged hint: allocated %+v, want the agent's own choice, NUMA node 0", rep.Allocated)
	}
	if evs := e.eventsWith(classify.ReasonNUMAHintIgnored); len(evs) != 1 || !strings.Contains(evs[0], "finegrain-placer-pods") {
		t.Errorf("events %v, want one %s naming the missing policy", evs, classify.ReasonNUMAHintIgnored)
	}

	// The policy is applied: the next check trusts hints again.
	missing.Store(false)
	e.a.checkHints(context.Background())
	placed := newPod("placed", exclusiveLabel, "1")
	placed.Spec.SchedulerName = classify.DefaultPlacerSchedulerName
	placed.Annotations = map[string]string{classify.AnnotationNUMANode: "1"}
	e.apply(placed)
	if rep := e.a.DrainPods(context.Background()); len(rep.Allocated) != 1 || rep.Allocated[0].NUMANode != 1 {
		t.Errorf("with the policy in force: allocated %+v, want NUMA node 1", rep.Allocated)
	}
}

func TestHintPolicyGuard(t *testing.T) {
	obj := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
			"metadata": map[string]any{"name": name}, "spec": spec}}
		return u
	}
	policy := obj("ValidatingAdmissionPolicy", "p", map[string]any{})
	deny := obj("ValidatingAdmissionPolicyBinding", "p", map[string]any{"policyName": "p", "validationActions": []any{"Deny"}})
	warn := obj("ValidatingAdmissionPolicyBinding", "p", map[string]any{"policyName": "p", "validationActions": []any{"Warn", "Audit"}})
	other := obj("ValidatingAdmissionPolicyBinding", "p", map[string]any{"policyName": "q", "validationActions": []any{"Deny"}})
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"in force", []runtime.Object{policy, deny}, ""},
		{"no binding", []runtime.Object{policy}, "ValidatingAdmissionPolicyBinding p that lets only the placer write the hint does not exist"},
		{"no policy", []runtime.Object{deny}, "ValidatingAdmissionPolicy p that lets only the placer write the hint does not exist"},
		{"warn only", []runtime.Object{policy, warn}, "not policy \"p\" with Deny"},
		{"another policy", []runtime.Object{policy, other}, "binds policy \"q\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), tc.objs...)
			err := HintPolicyGuard(client, "p")(context.Background())
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("guard = %v, want %q", err, tc.want)
			}
		})
	}
}
