package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// bench runs the measurements against one cluster.
type bench struct {
	o      options
	client kubernetes.Interface
	rec    *recorder
	layout cgroup.Layout
	log    *slog.Logger
	ns     string
}

// pinSample is one worker's unpinned window.
type pinSample struct {
	Pod    string        `json:"pod"`
	CPUs   string        `json:"cpus"`
	Window time.Duration `json:"windowNs"`
}

// workerPod is a Guaranteed pod asking for exclusive CPUs and idling.
func (b *bench) workerPod(name string) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(b.o.wantCPUs), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("16Mi")}
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"finegrain.dev/pinning": "exclusive", "app": "pinwindow"}},
		Spec: corev1.PodSpec{
			HostNetwork:                   b.o.hostNetwork,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "worker", Image: b.o.image, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		},
	}
}

// pinOne creates one worker, waits for its pin and reads its window from the recorder, then
// deletes it and waits until it is gone (so the next worker finds its CPUs free).
func (b *bench) pinOne(ctx context.Context, name string) (pinSample, error) {
	pods := b.client.CoreV1().Pods(b.ns)
	created, err := pods.Create(ctx, b.workerPod(name), metav1.CreateOptions{})
	if err != nil {
		return pinSample{}, fmt.Errorf("create %s: %w", name, err)
	}
	defer b.deleteAndWait(ctx, name)
	dir, pin, err := b.waitPinned(ctx, created.Name)
	if err != nil {
		return pinSample{}, err
	}
	defer b.rec.forget(dir)
	window, _, ok := b.rec.firstEqual(dir, pin.String())
	if !ok {
		return pinSample{}, fmt.Errorf("%s: the recorder never read %s in %s (did it see the directory appear?)", name, pin, dir)
	}
	return pinSample{Pod: name, CPUs: pin.String(), Window: window}, nil
}

// waitPinned waits until the worker's cgroup carries a pin of the requested size.
func (b *bench) waitPinned(ctx context.Context, name string) (string, cpuset.CPUSet, error) {
	deadline := time.Now().Add(b.o.podTimeout)
	var last string
	for time.Now().Before(deadline) {
		pod, err := b.client.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", cpuset.CPUSet{}, err
		}
		last = string(pod.Status.Phase)
		if len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].ContainerID != "" {
			dir, cpus, err := b.cpusOf(pod)
			if err == nil && cpus.Size() == b.o.wantCPUs {
				return dir, cpus, nil
			}
			if err != nil {
				last = err.Error()
			} else {
				last = fmt.Sprintf("%s carries %s", dir, cpus)
			}
		}
		select {
		case <-ctx.Done():
			return "", cpuset.CPUSet{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "", cpuset.CPUSet{}, fmt.Errorf("%s not pinned within %s: %s", name, b.o.podTimeout, last)
}

func (b *bench) cpusOf(pod *corev1.Pod) (string, cpuset.CPUSet, error) {
	ref, err := cgroup.NewContainerRef(string(pod.UID), string(pod.Status.QOSClass), pod.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		return "", cpuset.CPUSet{}, err
	}
	dir, err := b.layout.ContainerDir(cgroup.CPUSet, ref)
	if err != nil {
		return "", cpuset.CPUSet{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, cpusFile))
	if err != nil {
		return dir, cpuset.CPUSet{}, err
	}
	cpus, err := cpulist.Parse(string(data))
	return dir, cpus, err
}

func (b *bench) deleteAndWait(ctx context.Context, name string) {
	pods := b.client.CoreV1().Pods(b.ns)
	zero := int64(0)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !errors.IsNotFound(err) {
		b.log.Warn("cannot delete worker", "pod", name, "reason", err.Error())
		return
	}
	for deadline := time.Now().Add(b.o.podTimeout); time.Now().Before(deadline); {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); errors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.log.Warn("worker still exists", "pod", name)
}

// measureWindows pins n workers one after the other.
func (b *bench) measureWindows(ctx context.Context, m mode, n int) ([]pinSample, error) {
	var out []pinSample
	for i := range n {
		s, err := b.pinOne(ctx, fmt.Sprintf("pw-%s-%03d", m, i))
		if err != nil {
			return out, err
		}
		out = append(out, s)
		if (i+1)%10 == 0 {
			b.log.Info("pinned workers", "mode", string(m), "done", i+1, "of", n, "lastWindow", s.Window)
		}
	}
	return out, nil
}

// measureDrift rewrites a pinned worker's cpuset.cpus with every CPU, rounds times, and returns
// how long the agent took each time to write the pin back.
func (b *bench) measureDrift(ctx context.Context, rounds int, all cpuset.CPUSet) ([]time.Duration, error) {
	name := "pw-drift"
	if _, err := b.client.CoreV1().Pods(b.ns).Create(ctx, b.workerPod(name), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	defer b.deleteAndWait(ctx, name)
	dir, pin, err := b.waitPinned(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range rounds {
		// Spread the rewrites over the agent's reconcile period.
		time.Sleep(time.Duration(137*(i+1)%500) * time.Millisecond)
		if err := os.WriteFile(filepath.Join(dir, cpusFile), []byte(all.String()), 0o644); err != nil {
			return out, fmt.Errorf("rewrite %s: %w", dir, err)
		}
		start := time.Now()
		for {
			if at, ok := b.rec.firstEqualAfter(dir, pin.String(), start); ok {
				out = append(out, at.Sub(start))
				break
			}
			if time.Since(start) > 10*time.Second {
				return out, fmt.Errorf("drift of %s not repaired within 10 s", dir)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out, nil
}

// measureIdle samples the agent's CPU time and memory while nothing happens.
func measureIdle(ctx context.Context, pid int, d time.Duration) (cpuShare float64, rss int64, err error) {
	before, err := readUsage(pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(d):
	}
	after, err := readUsage(pid)
	if err != nil {
		return 0, 0, err
	}
	return float64(after.cpu-before.cpu) / float64(time.Since(start)), after.rss, nil
}
