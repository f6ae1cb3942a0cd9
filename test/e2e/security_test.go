//go:build e2e

// Issue 21 on the real API server (1.33): the admission policies of daemonset/policy. A node
// agent's service account token bound to one node (as the kubelet projects it into the agent's
// pod) writes no other node's NodeResourceTopology; a namespace user may create HPCJobs (the
// aggregated edit role) but not set the placer's NUMA hint, bind a pod in the placer's name or
// write a job's status; the placer's service account may.
package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

const placerUser = "system:serviceaccount:" + framework.SystemNamespace + ":finegrain-placer"

// applyPolicies applies the deployment's service accounts, RBAC, CRDs and admission policies
// (not its workloads) and waits until the API server enforces both policies.
func applyPolicies(t *testing.T, c *framework.Cluster) {
	t.Helper()
	args := []string{"apply"}
	for _, f := range []string{"namespace.yaml", "crds/noderesourcetopology.yaml", "placer/crd-hpcjob.yaml",
		"nodeagent/serviceaccount.yaml", "nodeagent/rbac.yaml", "nodeagent/rbac-report.yaml",
		"placer/rbac.yaml", "placer/rbac-users.yaml", "policy/nrt-own-node.yaml", "policy/placer-pods.yaml"} {
		args = append(args, "-f", c.RepoPath("daemonset/"+f))
	}
	if out, err := c.Kubectl(context.Background(), args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// A policy takes effect once the API server's own informer has it: until a probe is refused
	// (the admin is not the placer, so the hint policy refuses it too).
	agent := dynamic.NewForConfigOrDie(impersonatedConfig(c, agentUser, []string{"system:serviceaccounts"}, nil))
	framework.Eventually(t, "the admission policies to be enforced", time.Minute, func(ctx context.Context) error {
		pod := hinted("probe")
		_, perr := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		_, nerr := applyNRT(ctx, agent, "policy-probe")
		if !isPolicyDenial(perr) || !isPolicyDenial(nerr) {
			return fmt.Errorf("not yet: pod %v, NodeResourceTopology %v", perr, nerr)
		}
		return nil
	})
}

// isPolicyDenial reports whether err is an admission policy's refusal (not RBAC's).
func isPolicyDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

func impersonatedConfig(c *framework.Cluster, user string, groups []string, extra map[string][]string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated"), Extra: extra}
	return cfg
}

func impersonated(t *testing.T, c *framework.Cluster, user string, groups []string, extra map[string][]string) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(impersonatedConfig(c, user, groups, extra))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// applyNRT server-side-applies (dry run) a free-core map for node, as the agent would.
func applyNRT(ctx context.Context, client dynamic.Interface, node string) (*unstructured.Unstructured, error) {
	u := st.NRT(node, 1, st.Zone{Free: "0-1", Available: -1})
	return client.Resource(nrt.GroupVersionResource).Apply(ctx, node, u,
		metav1.ApplyOptions{FieldManager: "finegrain-nodeagent", Force: true, DryRun: []string{metav1.DryRunAll}})
}

// hinted is a pod that carries the placer's NUMA node hint.
func hinted(name string) *corev1.Pod {
	pod := framework.Pod(name, framework.Container("main", framework.WorkerImage))
	framework.LocalDefaults(pod)
	pod.Annotations = map[string]string{v1alpha1.AnnotationNUMANode: "1"}
	return pod
}

// A token of the agent's service account bound to a pod on this node — what the kubelet projects
// into the agent's pod — carries the node claim, and with it the agent writes its own node's map
// and no other's. Without a node claim it writes none.
func TestNodeResourceTopologyWritesAreNodeScoped(t *testing.T) {
	c := framework.Setup(t)
	applyPolicies(t, c)
	ctx := context.Background()

	holder := framework.Pod("token-holder", framework.Container("main", framework.WorkerImage))
	framework.LocalDefaults(holder)
	holder.Spec.ServiceAccountName = "finegrain-nodeagent"
	holder.Spec.NodeName = c.NodeName
	holder.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pods := c.Client.CoreV1().Pods(framework.SystemNamespace)
	created, err := pods.Create(ctx, holder, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), holder.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})

	tr, err := c.Client.CoreV1().ServiceAccounts(framework.SystemNamespace).CreateToken(ctx, "finegrain-nodeagent", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token bound to pod %s: %v", created.Name, err)
	}
	review, err := c.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.User.Extra[nodeNameExtra]; !review.Status.Authenticated || !slices.Equal(got, authenticationv1.ExtraValue{c.NodeName}) {
		t.Fatalf("the token bound to a pod on %s authenticates as %+v; want the node claim %s=[%s]", c.NodeName, review.Status.User, nodeNameExtra, c.NodeName)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	agent := dynamic.NewForConfigOrDie(cfg)

	other := "finegrain-other-node"
	for _, n := range c.Nodes {
		if n.Name != c.NodeName {
			other = n.Name
		}
	}
	if _, err := applyNRT(ctx, agent, c.NodeName); err != nil {
		t.Errorf("the agent's token of node %s may not write its own node's map: %v", c.NodeName, err)
	}
	_, err = applyNRT(ctx, agent, other)
	if !isPolicyDenial(err) || !strings.Contains(err.Error(), "may write only its own node's NodeResourceTopology") ||
		!strings.Contains(err.Error(), "bound to node "+c.NodeName) {
		t.Errorf("forged write of node %s's map with node %s's token: %v, want the policy's refusal naming both", other, c.NodeName, err)
	}
	unbound := dynamic.NewForConfigOrDie(impersonatedConfig(c, agentUser, []string{"system:serviceaccounts"}, nil))
	if _, err := applyNRT(ctx, unbound, c.NodeName); !isPolicyDenial(err) || !strings.Contains(err.Error(), "bound to no node") {
		t.Errorf("a write with no node claim: %v, want the policy's refusal", err)
	}
}

// A namespace user (the edit role) may make pods and HPCJobs, but not set the placer's NUMA
// hint, create a pod bound in the placer's name, or write a job's status; the placer may.
func TestPlacerPodsAndHPCJobsAdmission(t *testing.T) {
	c := framework.Setup(t)
	applyPolicies(t, c)
	ctx := context.Background()
	ns := c.Namespace(t)
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant := impersonated(t, c, "tenant", nil, nil)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, "the tenant's edit role to be in force", 30*time.Second, func(ctx context.Context) error {
		_, err := tenant.CoreV1().Pods(ns).Create(ctx, framework.Pod("plain", framework.Container("main", framework.WorkerImage)), dry)
		return err
	})

	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, hinted("hinted"), dry); !isPolicyDenial(err) || !strings.Contains(err.Error(), "only the finegrain placer may set annotation finegrain.dev/numa-node") {
		t.Errorf("a tenant's pod with the NUMA hint: %v, want the policy's refusal", err)
	}
	bound := framework.Pod("bound", framework.Container("main", framework.WorkerImage))
	framework.LocalDefaults(bound)
	bound.Spec.SchedulerName, bound.Spec.NodeName = v1alpha1.DefaultSchedulerName, c.NodeName
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, bound, dry); !isPolicyDenial(err) || !strings.Contains(err.Error(), "already bound to a node in its name") {
		t.Errorf("a tenant's pod bound in the placer's name: %v, want the policy's refusal", err)
	}
	// A pod of the tenant's that waits (it fits no node), then annotated with the hint.
	waiting := framework.Pod("waiting", framework.Container("main", framework.WorkerImage))
	framework.LocalDefaults(waiting)
	waiting.Spec.NodeSelector = map[string]string{"finegrain.dev/no-such-node": "true"}
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, waiting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationNUMANode + `":"0"}}}`)
	if _, err := tenant.CoreV1().Pods(ns).Patch(ctx, "waiting", types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); !isPolicyDenial(err) {
		t.Errorf("a tenant adding the hint to its pod: %v, want the policy's refusal", err)
	}

	// HPCJobs come with the edit role; their status does not.
	job := testJob("tenant-job", 1)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	tenantDyn := dynamic.NewForConfigOrDie(impersonatedConfig(c, "tenant", nil, nil))
	jobs := tenantDyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	// The edit role gains HPCJobs when the controller manager aggregates rbac-users.yaml into it.
	framework.Eventually(t, "the tenant may create an HPCJob (the edit role aggregated)", 30*time.Second, func(ctx context.Context) error {
		_, err := jobs.Create(ctx, &unstructured.Unstructured{Object: obj}, dry)
		return err
	})
	status := []byte(`{"status":{"phase":"Running"}}`)
	if _, err := jobs.Patch(ctx, "tenant-job", types.MergePatchType, status, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant writing an HPCJob's status: %v, want RBAC's refusal", err)
	}

	// The placer may do all of it.
	placer := impersonated(t, c, placerUser, []string{"system:serviceaccounts"}, nil)
	both := hinted("placed")
	both.Spec.SchedulerName, both.Spec.NodeName = v1alpha1.DefaultSchedulerName, c.NodeName
	if _, err := placer.CoreV1().Pods(ns).Create(ctx, both, dry); err != nil {
		t.Errorf("the placer may not create a bound pod with its hint: %v", err)
	}
}
