package agentbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// rolloutLimit is how long SetArgs waits for the agent's new pod to be ready.
const rolloutLimit = 3 * time.Minute

// DaemonSet is the node agent's DaemonSet, whose first container's arguments a bench changes
// between measurements.
type DaemonSet struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
}

// Args returns the agent container's arguments.
func (d DaemonSet) Args(ctx context.Context) ([]string, error) {
	ds, err := d.Client.AppsV1().DaemonSets(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
	}
	return slices.Clone(ds.Spec.Template.Spec.Containers[0].Args), nil
}

// SetArgs rolls the agent out with args (nothing changes when it already runs with them) and
// waits until the DaemonSet is rolled out and one of its pods with args is ready; it returns
// that pod.
func (d DaemonSet) SetArgs(ctx context.Context, args []string) (*corev1.Pod, error) {
	ds, err := d.Client.AppsV1().DaemonSets(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
	}
	if !slices.Equal(ds.Spec.Template.Spec.Containers[0].Args, args) {
		ds.Spec.Template.Spec.Containers[0].Args = args
		if ds, err = d.Client.AppsV1().DaemonSets(d.Namespace).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("update agent DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	var pod *corev1.Pod
	err = Poll(ctx, "the agent's DaemonSet "+d.Namespace+"/"+d.Name+" to roll out", rolloutLimit, func() error {
		var why string
		pod, why = d.rolledOut(ctx, ds.Generation, args)
		if pod == nil {
			return fmt.Errorf("%s", why)
		}
		return nil
	})
	return pod, err
}

// rolledOut returns a ready agent pod running args once the DaemonSet's status says generation
// is rolled out everywhere, or why not yet.
func (d DaemonSet) rolledOut(ctx context.Context, generation int64, args []string) (*corev1.Pod, string) {
	ds, err := d.Client.AppsV1().DaemonSets(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err.Error()
	}
	st := ds.Status
	if st.ObservedGeneration < generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled || st.NumberUnavailable > 0 {
		return nil, fmt.Sprintf("status %+v", st)
	}
	pods, err := d.Client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
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

// ReplaceFlags returns args without the flags named in names (written "--name" or
// "--name=value"), with set appended; args is left as it is.
func ReplaceFlags(args, names []string, set ...string) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return slices.ContainsFunc(names, func(n string) bool {
			return a == "--"+n || strings.HasPrefix(a, "--"+n+"=")
		})
	})
	return append(out, set...)
}
