package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/internal/observe"
)

// How long the common steps may take on the local cluster (they take about a second each; the
// margin covers a machine shared with builds).
const (
	NamespaceTimeout = 60 * time.Second
	PodStartTimeout  = 90 * time.Second
	PodDeleteTimeout = 60 * time.Second
)

// InClusterEnv is what a container needs to reach the API server through the in-cluster
// configuration: no kube-proxy runs, so the service address the kubelet injects leads nowhere.
func InClusterEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
	}
}

// Container returns a container running image with imagePullPolicy Never; command, when given,
// replaces the image's entrypoint.
func Container(name, image string, command ...string) corev1.Container {
	return corev1.Container{Name: name, Image: image, Command: command, ImagePullPolicy: corev1.PullNever}
}

// Pod returns a pod of the given containers that never restarts them.
func Pod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyNever},
	}
}

// LocalDefaults makes pod fit the local cluster: host network (there is no pod network), a
// 1-second grace period, imagePullPolicy Never and the in-cluster API address in every container
// that does not set them.
func LocalDefaults(pod *corev1.Pod) {
	pod.Spec.HostNetwork = true
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = corev1.PullNever
			}
			for _, env := range InClusterEnv() {
				if !hasEnv(c.Env, env.Name) {
					c.Env = append(c.Env, env)
				}
			}
		}
	}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Namespace creates a namespace for one test and waits until pods can run in it (its default
// service account and root CA config map exist). When the test ends its pods are deleted and
// waited for (the kubelet has stopped them), so the next test starts on a quiet node, then the
// namespace is deleted.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + dnsPrefix(t.Name()),
		Labels:       map[string]string{"finegrain.dev/e2e": "true"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace for %s: %v", t.Name(), err)
	}
	name := ns.Name
	t.Cleanup(func() { c.deleteNamespace(t, name) })
	Eventually(t, "service account default and config map kube-root-ca.crt in namespace "+name, NamespaceTimeout, func(ctx context.Context) error {
		if _, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := c.Client.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	return name
}

func (c *Cluster) deleteNamespace(t testing.TB, ns string) {
	ctx := context.Background()
	// The pods' own short grace period, not 0: the API object must stay until the kubelet has
	// stopped the containers and removed their cgroups. A controller still running (the placer
	// with a job left in the namespace) may make pods again while the namespace lives: those are
	// deleted too, as they appear.
	deleteAll := func(ctx context.Context) error {
		err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("delete the pods of namespace %s: %w", ns, err)
		}
		return nil
	}
	if err := deleteAll(ctx); err != nil {
		t.Error(err)
	}
	_, err := Poll(ctx, PodDeleteTimeout, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				if err := deleteAll(ctx); err != nil {
					return err
				}
				break
			}
		}
		return fmt.Errorf("%d pods left, e.g. %s in phase %s", len(pods.Items), pods.Items[0].Name, pods.Items[0].Status.Phase)
	})
	if err != nil {
		t.Errorf("pods of namespace %s did not go within %v: %v", ns, PodDeleteTimeout, err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", ns, err)
	}
}

// dnsPrefix turns a test name into the start of a namespace name.
func dnsPrefix(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.TrimSuffix(b.String(), "-") + "-"
}

// CreatePod applies LocalDefaults to pod, creates it in ns and, should the test fail, dumps it
// (see DumpOnFailure).
func (c *Cluster) CreatePod(t testing.TB, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	LocalDefaults(pod)
	created, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
	c.DumpOnFailure(t, ns, created.Name)
	return created
}

// PodCondition reports whether a pod has reached a state; an error stops the wait at once.
type PodCondition func(*corev1.Pod) (bool, error)

// WaitForPod polls pod ns/name until cond holds and returns it; after timeout it fails the test
// with the pod's phase and container states.
func (c *Cluster) WaitForPod(t testing.TB, ns, name, what string, timeout time.Duration, cond PodCondition) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var condErr error
	_, err := Poll(context.Background(), timeout, func(ctx context.Context) error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		ok, err := cond(p)
		if err != nil {
			condErr = err
			return nil
		}
		if !ok {
			return fmt.Errorf("pod is %s", observe.PodSummary(p))
		}
		return nil
	})
	if condErr != nil {
		t.Fatalf("pod %s/%s can no longer become %s: %v", ns, name, what, condErr)
	}
	if err != nil {
		t.Fatalf("pod %s/%s did not become %s within %v: %v", ns, name, what, timeout, err)
	}
	return pod
}

// Running holds once every container of the pod runs; a container that terminated is an error.
func Running(p *corev1.Pod) (bool, error) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false, fmt.Errorf("pod ended in phase %s", p.Status.Phase)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false, nil
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false, nil
		}
	}
	return true, nil
}

// Completed holds once the pod has succeeded or failed.
func Completed(p *corev1.Pod) (bool, error) {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
}

// PodLogs returns a container's log through the API server (and so through the kubelet).
func (c *Cluster) PodLogs(ctx context.Context, ns, pod, container string) (string, error) {
	data, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of container %s in pod %s/%s: %w", container, ns, pod, err)
	}
	return string(data), nil
}

// DeletePod deletes a pod and waits until it is gone, which the kubelet allows once it has
// stopped the pod's containers.
func (c *Cluster) DeletePod(t testing.TB, ns, name string) {
	t.Helper()
	err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	Eventually(t, fmt.Sprintf("pod %s/%s to be gone", ns, name), PodDeleteTimeout, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("pod %s/%s still exists", ns, name)
	})
}
