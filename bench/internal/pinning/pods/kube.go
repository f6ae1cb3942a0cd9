package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/internal/observe"
)

// poll is how often pod states are read while waiting.
const poll = 200 * time.Millisecond

// kube is the bench's namespace on the cluster and the pods in it.
type kube struct {
	client kubernetes.Interface
	ns     string
	log    *slog.Logger
}

// newNamespace creates a namespace for the bench and waits until pods can be created in it (its
// default service account exists).
func newNamespace(ctx context.Context, client kubernetes.Interface, timeout time.Duration, log *slog.Logger) (*kube, error) {
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "pinning-bench-", Labels: map[string]string{labelApp: appName},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create the bench's namespace: %w", err)
	}
	k := &kube{client: client, ns: ns.Name, log: log}
	err = until(ctx, timeout, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(k.ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("namespace %s: no default service account: %w", k.ns, err), k.close(context.WithoutCancel(ctx), timeout))
	}
	log.Info("bench namespace ready", "namespace", k.ns)
	return k, nil
}

// close deletes the bench's pods, waits until the kubelet has stopped them, and deletes the
// namespace.
func (k *kube) close(ctx context.Context, timeout time.Duration) error {
	err := k.deletePods(ctx, timeout)
	if derr := k.client.CoreV1().Namespaces().Delete(ctx, k.ns, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
		err = errors.Join(err, fmt.Errorf("delete namespace %s: %w", k.ns, derr))
	}
	return err
}

func (k *kube) create(ctx context.Context, p *corev1.Pod) error {
	if _, err := k.client.CoreV1().Pods(k.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", k.ns, p.Name, err)
	}
	return nil
}

// condition tells whether a pod has reached a state; an error means it never will.
type condition func(*corev1.Pod) (bool, error)

// running holds once the pod's container runs.
func running(p *corev1.Pod) (bool, error) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false, fmt.Errorf("it ended in phase %s before it was seen running", p.Status.Phase)
	}
	if p.Status.Phase != corev1.PodRunning {
		return false, nil
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false, nil
		}
	}
	return len(p.Status.ContainerStatuses) > 0, nil
}

// ended holds once the pod has succeeded or failed.
func ended(p *corev1.Pod) (bool, error) {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
}

// wait polls the named pods until cond holds for each and returns them.
func (k *kube) wait(ctx context.Context, names []string, what string, timeout time.Duration, cond condition) (map[string]*corev1.Pod, error) {
	got := map[string]*corev1.Pod{}
	err := until(ctx, timeout, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, done := got[name]; done {
				continue
			}
			p, err := k.client.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("pod %s/%s: %w", k.ns, name, err)
			}
			ok, err := cond(p)
			if err != nil {
				return false, fmt.Errorf("pod %s/%s can no longer become %s: %w (%s)", k.ns, name, what, err, observe.PodSummary(p))
			}
			if !ok {
				return false, nil
			}
			got[name] = p
		}
		return true, nil
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		var late []string
		for _, name := range names {
			if _, done := got[name]; !done {
				late = append(late, name)
			}
		}
		if p, gerr := k.client.CoreV1().Pods(k.ns).Get(context.WithoutCancel(ctx), late[0], metav1.GetOptions{}); gerr == nil {
			return nil, fmt.Errorf("pods %v did not become %s within %v; %s is %s", late, what, timeout, late[0], observe.PodSummary(p))
		}
		return nil, fmt.Errorf("pods %v did not become %s within %v", late, what, timeout)
	}
	return got, err
}

// logs returns the container log of pod name.
func (k *kube) logs(ctx context.Context, name string) ([]byte, error) {
	b, err := k.client.CoreV1().Pods(k.ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of pod %s/%s: %w", k.ns, name, err)
	}
	return b, nil
}

// deletePods deletes every pod of the namespace and waits until they are gone, which the API
// server allows once the kubelet has stopped their containers (and the agent has released
// their CPUs).
func (k *kube) deletePods(ctx context.Context, timeout time.Duration) error {
	pods := k.client.CoreV1().Pods(k.ns)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete the pods of namespace %s: %w", k.ns, err)
	}
	return until(ctx, timeout, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("list the pods of namespace %s: %w", k.ns, err)
		}
		return len(list.Items) == 0, nil
	})
}

// until calls f every poll until it returns true or an error, or timeout passes.
func until(ctx context.Context, timeout time.Duration, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := f(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
