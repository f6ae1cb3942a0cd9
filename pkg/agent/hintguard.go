package agent

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
)

// Why the agent honours the placer's NUMA node hint (finegrain.dev/numa-node) only while an
// admission policy guards it. The agent sees a pod, not who wrote its annotations, and the placer
// itself creates HPCJob workers already bound (spec.nodeName) with the hint set: a pod author who
// creates a pod with nodeName, schedulerName finegrain-placer and the annotation is
// indistinguishable from the placer by anything the pod says. Only admission sees the requester,
// so the ValidatingAdmissionPolicy finegrain-placer-pods (daemonset/policy) lets nobody but the
// placer's service account set the annotation or create pods bound in the placer's name. The agent
// checks that the policy and its binding (with the Deny action) are in force, at start and with
// every kubelet check, and ignores every hint, saying why, while they are not: a hint is an
// optimisation (the agent still chooses cores, and fits the request without it), so the failure
// mode is a worse NUMA node, never a forged one.

var (
	policiesResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	bindingsResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// HintPolicyGuard returns a Deps.NUMAHintGuard that finds the ValidatingAdmissionPolicy name and
// its binding of the same name, which must bind that policy with the Deny action. Its error says
// what is missing and what to do.
func HintPolicyGuard(client dynamic.Interface, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		b, err := client.Resource(bindingsResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return guardError("ValidatingAdmissionPolicyBinding", name, err)
		}
		policy, _, _ := unstructured.NestedString(b.Object, "spec", "policyName")
		actions, _, _ := unstructured.NestedStringSlice(b.Object, "spec", "validationActions")
		if policy != name || !slices.Contains(actions, "Deny") {
			return fmt.Errorf("ValidatingAdmissionPolicyBinding %s binds policy %q with actions %v, not policy %q with Deny: apply daemonset/policy as shipped", name, policy, actions, name)
		}
		if _, err := client.Resource(policiesResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return guardError("ValidatingAdmissionPolicy", name, err)
		}
		return nil
	}
}

func guardError(kind, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the %s %s that lets only the placer write the hint does not exist: apply daemonset/policy (kubectl apply -k daemonset/), or start the agent with --numa-hint-policy= to trust hints without it", kind, name)
	}
	return fmt.Errorf("cannot read the %s %s that lets only the placer write the hint: %w", kind, name, err)
}

// checkHints asks the guard whether hints may be honoured and records the answer for
// classification; it logs a change once.
func (a *Agent) checkHints(ctx context.Context) {
	if a.d.NUMAHintGuard == nil {
		return
	}
	why := ""
	if err := a.d.NUMAHintGuard(ctx); err != nil {
		why = err.Error()
	}
	if old, _ := a.hintsDistrusted.Swap(why).(string); old == why {
		return
	}
	if why != "" {
		a.log.Warn("ignoring the placer's NUMA node hints", "reason", why)
	} else {
		a.log.Info("honouring the placer's NUMA node hints: the admission policy that keeps them to the placer is in force")
	}
}

// classifyConfig is the classification configuration with the current trust in hints.
func (a *Agent) classifyConfig() classify.Config {
	cfg := a.opts.Classify
	cfg.HintsDistrusted, _ = a.hintsDistrusted.Load().(string)
	return cfg
}
