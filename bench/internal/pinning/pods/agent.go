package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/internal/observe"
)

// pauseLabel is the node selector that keeps the agent's DaemonSet off every node while a
// scenario runs without finegrain: no node carries it. Removing it restores the DaemonSet's own
// template, so the agent comes back exactly as it was deployed.
const pauseLabel = "finegrain.dev/pinning-bench-paused"

// agentControl switches finegrain's node agent on and off between scenarios and puts it back
// as it found it: a DaemonSet that existed is resumed; one it deployed from the overlay is
// deleted with every object that deploying created.
type agentControl struct {
	client   kubernetes.Interface
	ns, name string
	node     string
	kubectl  []string // kubectl and its --kubeconfig
	overlay  string
	timeout  time.Duration
	log      *slog.Logger
	// foundAbsent: no DaemonSet at the start; deployed: this run applied the overlay, creating
	// the objects named in created (kubectl's type/name form).
	foundAbsent, deployed bool
	created               []string
	// on: the agent runs (the DaemonSet exists and is not paused).
	on bool
}

// newAgentControl looks at the DaemonSet. One paused by an earlier run that did not finish counts
// as deployed: it is resumed at the end.
func newAgentControl(ctx context.Context, a agentControl) (*agentControl, error) {
	ds, err := a.client.AppsV1().DaemonSets(a.ns).Get(ctx, a.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		a.foundAbsent = true
		a.log.Info("node agent not deployed; scenarios that need it deploy it and the end removes it again", "overlay", a.overlay)
	case err != nil:
		return nil, fmt.Errorf("node agent DaemonSet %s/%s: %w", a.ns, a.name, err)
	default:
		_, paused := ds.Spec.Template.Spec.NodeSelector[pauseLabel]
		a.on = !paused
		if paused {
			a.log.Warn("node agent DaemonSet found paused by an earlier bench run; it is resumed at the end", "daemonset", a.ns+"/"+a.name)
		}
	}
	return &a, nil
}

// set makes the agent run (and be ready) on the node, or not run there at all.
func (a *agentControl) set(ctx context.Context, on bool) error {
	if a.foundAbsent && !a.deployed {
		if !on {
			return nil
		}
		if err := a.deploy(ctx); err != nil {
			return err
		}
		a.deployed, a.on = true, true
		return a.waitReady(ctx)
	}
	if on == a.on {
		return nil
	}
	if err := a.patchPause(ctx, !on); err != nil {
		return err
	}
	a.on = on
	if on {
		return a.waitReady(ctx)
	}
	return a.waitGone(ctx)
}

// restore puts the agent back as it was found.
func (a *agentControl) restore(ctx context.Context) error {
	if a.foundAbsent {
		if !a.deployed {
			return nil
		}
		a.log.Info("removing what deploying the node agent created", "objects", a.created)
		out, err := a.run(ctx, append([]string{"delete", "--ignore-not-found", "--wait=true"}, a.created...)...)
		if err != nil {
			return fmt.Errorf("remove the node agent this run deployed (%s): %w\n%s", strings.Join(a.created, " "), err, out)
		}
		return nil
	}
	if a.on {
		return nil
	}
	if err := a.patchPause(ctx, false); err != nil {
		return err
	}
	a.on = true
	return a.waitReady(ctx)
}

// deploy applies the overlay and remembers which of its objects did not exist before.
func (a *agentControl) deploy(ctx context.Context) error {
	before, err := a.run(ctx, "get", "-k", a.overlay, "-o", "name", "--ignore-not-found")
	if err != nil {
		return fmt.Errorf("list the objects of %s: %w\n%s", a.overlay, err, before)
	}
	after, err := a.run(ctx, "apply", "-k", a.overlay, "-o", "name")
	if err != nil {
		return fmt.Errorf("deploy the node agent (kubectl apply -k %s): %w\n%s", a.overlay, err, after)
	}
	existed := strings.Fields(before)
	for _, name := range strings.Fields(after) {
		if !slices.Contains(existed, name) {
			a.created = append(a.created, name)
		}
	}
	a.log.Info("node agent deployed", "overlay", a.overlay, "created", len(a.created))
	return nil
}

func (a *agentControl) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, a.kubectl[0], append(slices.Clone(a.kubectl[1:]), args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// patchPause adds or removes the node selector no node matches.
func (a *agentControl) patchPause(ctx context.Context, pause bool) error {
	value := "null"
	if pause {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:%s}}}}}`, pauseLabel, value)
	_, err := a.client.AppsV1().DaemonSets(a.ns).Patch(ctx, a.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("node agent DaemonSet %s/%s: set paused=%v: %w", a.ns, a.name, pause, err)
	}
	a.log.Info("node agent", "paused", pause)
	return nil
}

// agentPods lists the DaemonSet's pods on the node.
func (a *agentControl) agentPods(ctx context.Context) ([]corev1.Pod, error) {
	ds, err := a.client.AppsV1().DaemonSets(a.ns).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node agent DaemonSet %s/%s: %w", a.ns, a.name, err)
	}
	if ds.Spec.Selector == nil {
		return nil, fmt.Errorf("node agent DaemonSet %s/%s has no selector", a.ns, a.name)
	}
	list, err := a.client.CoreV1().Pods(a.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set(ds.Spec.Selector.MatchLabels).String(),
		FieldSelector: "spec.nodeName=" + a.node,
	})
	if err != nil {
		return nil, fmt.Errorf("pods of the node agent DaemonSet %s/%s: %w", a.ns, a.name, err)
	}
	return list.Items, nil
}

// waitReady waits until exactly one agent pod runs on the node and is ready.
func (a *agentControl) waitReady(ctx context.Context) error {
	var last string
	err := until(ctx, a.timeout, func(ctx context.Context) (bool, error) {
		pods, err := a.agentPods(ctx)
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d pods", len(pods))
		if len(pods) != 1 || pods[0].DeletionTimestamp != nil {
			return false, nil
		}
		last = observe.PodSummary(&pods[0])
		for _, c := range pods[0].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node agent not ready on node %s within %v (last: %s): %w", a.node, a.timeout, last, err)
	}
	return nil
}

// waitGone waits until no agent pod is left on the node.
func (a *agentControl) waitGone(ctx context.Context) error {
	err := until(ctx, a.timeout, func(ctx context.Context) (bool, error) {
		pods, err := a.agentPods(ctx)
		return len(pods) == 0, err
	})
	if err != nil {
		return errors.Join(fmt.Errorf("node agent still on node %s after %v", a.node, a.timeout), err)
	}
	return nil
}
