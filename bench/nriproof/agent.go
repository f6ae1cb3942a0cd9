package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
)

// agentControl reconfigures and observes the agent's DaemonSet.
type agentControl struct {
	client    kubernetes.Interface
	namespace string
	name      string
	endpoint  string
}

// withMode replaces the path flags in args: --nri=on pins at creation (the agent waits for the
// socket), --nri=off with inotify is the path of runtimes without NRI.
func withMode(args []string, m mode) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--nri" || strings.HasPrefix(a, "--nri=") || strings.HasPrefix(a, "--inotify")
	})
	if m == modeNRI {
		return append(out, "--nri=on")
	}
	return append(out, "--nri=off", "--inotify=true")
}

// args returns the DaemonSet's agent container arguments.
func (a agentControl) args(ctx context.Context) ([]string, error) {
	ds, err := a.client.AppsV1().DaemonSets(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent DaemonSet %s/%s: %w", a.namespace, a.name, err)
	}
	return slices.Clone(ds.Spec.Template.Spec.Containers[0].Args), nil
}

// setArgs rolls the agent out with args and waits for its new pod to be ready.
func (a agentControl) setArgs(ctx context.Context, args []string) (*corev1.Pod, error) {
	ds, err := a.client.AppsV1().DaemonSets(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(ds.Spec.Template.Spec.Containers[0].Args, args) {
		ds.Spec.Template.Spec.Containers[0].Args = args
		if ds, err = a.client.AppsV1().DaemonSets(a.namespace).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update agent DaemonSet: %w", err)
		}
	}
	var pod *corev1.Pod
	err = poll(ctx, "the agent's DaemonSet to roll out", 3*time.Minute, func() error {
		var why string
		pod, why = a.rolledOut(ctx, ds.Generation, args)
		if pod == nil {
			return fmt.Errorf("%s", why)
		}
		return nil
	})
	return pod, err
}

func (a agentControl) rolledOut(ctx context.Context, generation int64, args []string) (*corev1.Pod, string) {
	ds, err := a.client.AppsV1().DaemonSets(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, err.Error()
	}
	st := ds.Status
	if st.ObservedGeneration < generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled {
		return nil, fmt.Sprintf("status %+v", st)
	}
	pods, err := a.client.CoreV1().Pods(a.namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		return nil, err.Error()
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && slices.Equal(p.Spec.Containers[0].Args, args) && ready(p) {
			return p, ""
		}
	}
	return nil, "no ready agent pod with the new arguments yet"
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPath waits until the agent reports the mode's path first, and for NRI that the runtime
// synchronised its plugin.
func (a agentControl) waitPath(ctx context.Context, m mode) error {
	return poll(ctx, "the agent to take the "+string(m)+" path", time.Minute, func() error {
		v, err := inspect.Fetch(ctx, http.DefaultClient, a.endpoint)
		if err != nil {
			return err
		}
		if len(v.Paths) == 0 || v.Paths[0] != string(m) {
			return fmt.Errorf("agent paths %v", v.Paths)
		}
		if m != modeNRI {
			return nil
		}
		metrics, err := a.get(ctx, "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(metrics, "\nfinegrain_nodeagent_nri_connected 1\n") {
			return fmt.Errorf("the NRI plugin is not connected yet")
		}
		return nil
	})
}

// noPins waits until the agent holds no exclusive CPUs (the previous worker's were released).
func (a agentControl) noPins(ctx context.Context) error {
	return poll(ctx, "the agent to release every pin", time.Minute, func() error {
		v, err := inspect.Fetch(ctx, http.DefaultClient, a.endpoint)
		if err != nil {
			return err
		}
		for _, c := range v.Containers {
			if c.Pool == inspect.PoolExclusive {
				return fmt.Errorf("%s/%s still holds %s", c.PodLabel(), c.Container, c.CPUs)
			}
		}
		return nil
	})
}

func (a agentControl) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.endpoint+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body), nil
}

// poll calls f every 100 ms until it succeeds, ctx ends or limit passes.
func poll(ctx context.Context, what string, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
