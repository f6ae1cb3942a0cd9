package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// mode is one way the agent learns of new containers.
type mode string

const (
	// modeInotify is the agent's default: inotify plus the CRI runtime for names.
	modeInotify mode = "inotify"
	// modeInformer is the slow fallback alone: no inotify, no CRI; the pod status names the
	// container.
	modeInformer mode = "informer"
)

// modeArgs are the flags that select a mode (NRI is off in both: this program measures the
// paths that react to a cgroup after its creation); every other flag stays as it is.
func modeArgs(m mode, criEndpoint string) []string {
	if m == modeInformer {
		return []string{"--nri=off", "--inotify=false", "--cri-endpoint="}
	}
	return []string{"--nri=off", "--inotify=true", "--cri-endpoint=" + criEndpoint}
}

// agentControl reconfigures and observes the agent's DaemonSet.
type agentControl struct {
	client    kubernetes.Interface
	namespace string
	name      string
	layout    cgroup.Layout
}

// args returns the DaemonSet's agent container arguments.
func (a agentControl) args(ctx context.Context) ([]string, error) {
	ds, err := a.client.AppsV1().DaemonSets(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent DaemonSet %s/%s: %w", a.namespace, a.name, err)
	}
	return slices.Clone(ds.Spec.Template.Spec.Containers[0].Args), nil
}

// withMode replaces the mode flags in args.
func withMode(args []string, m mode, criEndpoint string) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return strings.HasPrefix(a, "--inotify") || strings.HasPrefix(a, "--cri-endpoint") || strings.HasPrefix(a, "--nri=")
	})
	return append(out, modeArgs(m, criEndpoint)...)
}

// criEndpoint returns the --cri-endpoint the DaemonSet runs with.
func criEndpoint(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--cri-endpoint="); ok && v != "" {
			return v
		}
	}
	return "unix:///run/containerd/containerd.sock"
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
	return a.waitRolledOut(ctx, ds.Generation)
}

func (a agentControl) waitRolledOut(ctx context.Context, generation int64) (*corev1.Pod, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pod, why := a.rolledOut(ctx, generation)
		if pod != nil {
			return pod, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("agent DaemonSet did not roll out within 3 minutes: %s", why)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (a agentControl) rolledOut(ctx context.Context, generation int64) (*corev1.Pod, string) {
	ds, err := a.client.AppsV1().DaemonSets(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, err.Error()
	}
	st := ds.Status
	if st.ObservedGeneration < generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled || st.NumberUnavailable > 0 {
		return nil, fmt.Sprintf("status %+v", st)
	}
	pods, err := a.client.CoreV1().Pods(a.namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		return nil, err.Error()
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && slices.Equal(p.Spec.Containers[0].Args, ds.Spec.Template.Spec.Containers[0].Args) && ready(p) {
			return p, ""
		}
	}
	return nil, "no ready pod with the new arguments yet"
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pid returns the agent process's PID, from its container cgroup.
func (a agentControl) pid(pod *corev1.Pod) (int, error) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return 0, fmt.Errorf("agent pod %s has no container status", pod.Name)
	}
	ref, err := cgroup.NewContainerRef(string(pod.UID), string(pod.Status.QOSClass), pod.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		return 0, err
	}
	dir, err := a.layout.ContainerDir(cgroup.CPUSet, ref)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, fmt.Errorf("agent processes: %w", err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	return strconv.Atoi(first)
}

// usage is a process's CPU time and resident memory.
type usage struct {
	cpu time.Duration
	rss int64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTicks = 100

func readUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return usage{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: unexpected times %q %q", pid, f[11], f[12])
	}
	u := usage{cpu: time.Duration(utime+stime) * time.Second / clockTicks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("/proc/%d/status VmRSS %q: %w", pid, v, err)
			}
			u.rss = kb << 10
		}
	}
	return u, nil
}
