// Package daemonset holds finegrain's deployment (kubectl apply -k daemonset/); its test checks
// the least-privilege promises of issue 21 that the manifests keep, not the cluster.
package daemonset

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/finegrain-dev/finegrain/pkg/agent"
)

// objects reads every document of a manifest file.
func objects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// Finding 7: the agent mounted all of /var/lib/kubelet (the kubelet's client key, every pod's
// secret volumes) to read one file. It mounts only the pod-resources socket's directory now, and
// nothing else of the kubelet's.
func TestAgentMountsOnlyWhatItReads(t *testing.T) {
	ds := as[appsv1.DaemonSet](t, objects(t, "nodeagent/daemonset.yaml")[0])
	spec := ds.Spec.Template.Spec
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for name, path := range hostPaths {
		if strings.HasPrefix(path, "/var/lib/kubelet") && path != "/var/lib/kubelet/pod-resources" {
			t.Errorf("volume %s mounts %s of the kubelet's root directory; only pod-resources is read", name, path)
		}
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.Name == "pod-resources" && (!m.ReadOnly || m.MountPath != "/var/lib/kubelet/pod-resources") {
			t.Errorf("pod-resources mounted at %s read-only %v", m.MountPath, m.ReadOnly)
		}
	}
	if sc := spec.Containers[0].SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("the agent's container security context %+v, want not privileged, no escalation, every capability dropped", sc)
	}
}

// The agent's RBAC has no right it does not use: no pod get, no writes but events and its
// NodeResourceTopology, reads of the hint policy by name only, ServiceObjectives listed and
// watched and the workloads their pods belong to read one by one (I/O limits).
func TestAgentRBAC(t *testing.T) {
	var rules []rbacv1.PolicyRule
	for _, f := range []string{"nodeagent/rbac.yaml", "nodeagent/rbac-report.yaml"} {
		for _, u := range objects(t, f) {
			if u.GetKind() == "ClusterRole" {
				rules = append(rules, as[rbacv1.ClusterRole](t, u).Rules...)
			}
		}
	}
	allowed := map[string][]string{
		"/pods":   {"list", "watch"},
		"/events": {"create", "patch"},
		"/nodes":  {"get"},
		"topology.node.k8s.io/noderesourcetopologies":                    {"get", "create", "patch"},
		"admissionregistration.k8s.io/validatingadmissionpolicies":       {"get"},
		"admissionregistration.k8s.io/validatingadmissionpolicybindings": {"get"},
		"finegrain.dev/serviceobjectives":                                {"list", "watch"},
		"apps/replicasets":                                               {"get"},
		"apps/deployments":                                               {"get"},
		"apps/statefulsets":                                              {"get"},
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !slices.Contains(allowed[g+"/"+res], v) {
						t.Errorf("the agent may %s %s/%s, which it does not use", v, g, res)
					}
				}
				if g == "admissionregistration.k8s.io" && !slices.Equal(r.ResourceNames, []string{agent.DefaultNUMAHintPolicy}) {
					t.Errorf("the agent reads %s %v, want only %s", res, r.ResourceNames, agent.DefaultNUMAHintPolicy)
				}
			}
		}
	}
}

// Finding 7, the placer: it could patch ConfigMaps and delete pods in every namespace. RBAC
// cannot scope its writes to the objects it owns (its code does: pkg/placer/controller's
// controlledBy checks), so this keeps its rights to the verbs it uses: no update, list or
// watch of Secrets, no write to nodes, free-core maps, roles or anything it does not make.
func TestPlacerRBAC(t *testing.T) {
	allowed := map[string][]string{
		"finegrain.dev/hpcjobs":            {"get", "list", "watch", "delete"},
		"finegrain.dev/hpcjobs/status":     {"patch"},
		"finegrain.dev/hpcjobs/finalizers": {"update"},
		"/nodes":                           {"list", "watch"},
		// get: the Slurm delegation bridge (issue 19) reads back by name a placeholder pod or
		// PodGroup whose name is taken, and a job's PodGroup before deleting it (rbac.yaml).
		"scheduling.x-k8s.io/podgroups":               {"get", "list", "watch", "create", "delete"},
		"scheduling.x-k8s.io/podgroups/status":        {"patch"},
		"scheduling.k8s.io/priorityclasses":           {"list", "watch"},
		"topology.node.k8s.io/noderesourcetopologies": {"list", "watch"},
		"/pods":         {"get", "list", "watch", "create", "patch", "delete"},
		"/pods/binding": {"create"},
		// Exec rescale hooks (issue 18), documented in rbac.yaml; over WebSocket an exec is a get.
		"/pods/exec":                 {"create", "get"},
		"/configmaps":                {"get", "create", "patch"},
		"/secrets":                   {"get", "create"},
		"/services":                  {"get", "create"},
		"events.k8s.io/events":       {"create", "patch"},
		"/events":                    {"list", "watch"},
		"coordination.k8s.io/leases": {"get", "create", "update"},
		// The service objective loop (issue 20), documented in rbac.yaml.
		"finegrain.dev/serviceobjectives":        {"get", "list", "watch"},
		"finegrain.dev/serviceobjectives/status": {"update"},
		"apps/deployments":                       {"get"},
		"apps/statefulsets":                      {"get"},
		"apps/replicasets":                       {"list"},
		"apps/deployments/scale":                 {"get", "update"},
		"apps/statefulsets/scale":                {"get", "update"},
		"/pods/resize":                           {"patch"},
		// The virtual cluster controller (issue 19), documented in rbac.yaml.
		"finegrain.dev/virtualclusters":            {"get", "list", "watch"},
		"finegrain.dev/virtualclusters/status":     {"patch"},
		"finegrain.dev/virtualclusters/finalizers": {"update"},
		// A virtual cluster's shared volume: its claim is checked before its pods mount it.
		"/persistentvolumeclaims": {"get"},
	}
	for _, u := range objects(t, "placer/rbac.yaml") {
		var rules []rbacv1.PolicyRule
		switch u.GetKind() {
		case "ClusterRole":
			rules = as[rbacv1.ClusterRole](t, u).Rules
		case "Role":
			rules = as[rbacv1.Role](t, u).Rules
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if !slices.Contains(allowed[g+"/"+res], v) {
							t.Errorf("%s %s: the placer may %s %s/%s, which it does not use", u.GetKind(), u.GetName(), v, g, res)
						}
					}
				}
			}
		}
	}
}

// The admission policies are shipped, bound with Deny, and name the service accounts the
// deployment makes; the hint policy is the one the agent looks for.
func TestAdmissionPolicies(t *testing.T) {
	kustomization, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]struct{ name, user string }{
		"policy/nrt-own-node.yaml": {"finegrain-nrt-own-node", "system:serviceaccount:finegrain-system:finegrain-nodeagent"},
		"policy/placer-pods.yaml":  {agent.DefaultNUMAHintPolicy, "system:serviceaccount:finegrain-system:finegrain-placer"},
	} {
		if !strings.Contains(string(kustomization), "  - "+file+"\n") {
			t.Errorf("kustomization.yaml does not apply %s", file)
		}
		objs := objects(t, file)
		if len(objs) != 2 || objs[0].GetKind() != "ValidatingAdmissionPolicy" || objs[1].GetKind() != "ValidatingAdmissionPolicyBinding" {
			t.Fatalf("%s: want a policy and its binding", file)
		}
		policy, binding := objs[0], objs[1]
		ref, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName")
		actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions")
		failure, _, _ := unstructured.NestedString(policy.Object, "spec", "failurePolicy")
		if policy.GetName() != want.name || binding.GetName() != want.name || ref != want.name || !slices.Equal(actions, []string{"Deny"}) || failure != "Fail" {
			t.Errorf("%s: policy %s, binding %s of %s with %v, failurePolicy %s", file, policy.GetName(), binding.GetName(), ref, actions, failure)
		}
		conditions, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		if len(conditions) != 1 || !strings.Contains(conditions[0].(map[string]any)["expression"].(string), "'"+want.user+"'") {
			t.Errorf("%s: match conditions %v do not name %s", file, conditions, want.user)
		}
	}
	for _, sa := range []string{"nodeagent/serviceaccount.yaml", "placer/rbac.yaml"} {
		u := objects(t, sa)[0]
		if u.GetKind() != "ServiceAccount" || u.GetNamespace() != "finegrain-system" {
			t.Errorf("%s: %s %s/%s, the policies name finegrain-system's service accounts", sa, u.GetKind(), u.GetNamespace(), u.GetName())
		}
	}
}

// HPCJobs come with the namespace roles: edit and admin may write them, view may read them, and
// no user role may write their status.
func TestHPCJobUserRoles(t *testing.T) {
	for _, u := range objects(t, "placer/rbac-users.yaml") {
		role := as[rbacv1.ClusterRole](t, u)
		for _, r := range role.Rules {
			for _, res := range r.Resources {
				if (res == "hpcjobs/status" || res == "serviceobjectives/status") && slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
					t.Errorf("%s may write %s (%v)", role.Name, res, r.Verbs)
				}
			}
		}
		edit := role.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
		view := role.Labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
		if edit == view {
			t.Errorf("%s aggregates to edit %v, view %v; want exactly one", role.Name, edit, view)
		}
	}
}
