package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
	fgresult "github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// tolerateAnnotation lets a pod start while the NRI plugin is absent (daemonset/nri/); the
// inotify mode's workers carry it so a runtime that requires the plugin still runs them.
const tolerateAnnotation = "tolerate-missing-plugins.finegrain.dev"

// sample is what one worker showed.
type sample struct {
	Pod         string `json:"pod"`
	UID         string `json:"uid"`
	ContainerID string `json:"containerID,omitempty"`
	// Pin is the exclusive CPUs the agent announced for the worker (its ExclusiveCPUs event).
	Pin string `json:"pin"`
	// AffinityAtInit is the rank process's first sched_getaffinity, AffinityAtStart a later one.
	AffinityAtInit  string `json:"affinityAtInit"`
	AffinityAtStart string `json:"affinityAtStart"`
	PinnedAtInit    bool   `json:"pinnedAtInit"`
	// SpecCPUs is the cpuset of the container's runtime spec, which runc applies before starting
	// its first process (empty: none, every CPU of the pod's cgroup); SpecRead says it was read,
	// SpecPinned that it was the pin.
	SpecCPUs   string `json:"specCPUs"`
	SpecRead   bool   `json:"specRead"`
	SpecPinned bool   `json:"specPinned"`
	// Via and Window are the agent's account of the pin (its "pinned container" log line).
	Via    string        `json:"via,omitempty"`
	Window time.Duration `json:"windowNs"`
	// Hook is the NRI plugin's time to answer the worker's CreateContainer.
	Hook time.Duration `json:"hookNs,omitempty"`
	// CreateContainer is containerd's time for the kubelet's CreateContainer.
	CreateContainer time.Duration `json:"createContainerNs,omitempty"`
	Error           string        `json:"error,omitempty"`
}

// workers runs pinned workers one after the other.
type workers struct {
	client  kubernetes.Interface
	ns      string
	image   string
	timeout time.Duration
	agent   agentView
	log     *slog.Logger
	// ctr and containerd read runtime specs; an empty ctr skips that.
	ctr, containerd string
}

// pinEvent matches the agent's ExclusiveCPUs event message.
var pinEvent = regexp.MustCompile(`gets exclusive CPUs (\S+) on NUMA node`)

func (w workers) run(ctx context.Context, m mode, n int) ([]sample, error) {
	var out []sample
	for i := range n {
		if err := w.agent.noPins(ctx); err != nil {
			return out, err
		}
		s, err := w.one(ctx, m, i)
		if err != nil {
			return out, err
		}
		out = append(out, s)
		if (i+1)%10 == 0 {
			w.log.Info("workers done", "mode", string(m), "pods", i+1)
		}
	}
	return out, nil
}

// one runs a worker to completion and reads what it showed.
func (w workers) one(ctx context.Context, m mode, i int) (sample, error) {
	pods := w.client.CoreV1().Pods(w.ns)
	pod, err := pods.Create(ctx, workerPod(fmt.Sprintf("%s-%03d", m, i), w.image, m), metav1.CreateOptions{})
	if err != nil {
		return sample{}, fmt.Errorf("create worker: %w", err)
	}
	s := sample{Pod: pod.Name, UID: string(pod.UID)}
	defer func() {
		grace := int64(0)
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}()
	err = agentbench.Poll(ctx, "worker "+pod.Name+" to finish", w.timeout, func() error {
		pod, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	if st := pod.Status.ContainerStatuses; len(st) == 1 {
		s.ContainerID = trimRuntime(st[0].ContainerID)
	}
	if pod.Status.Phase == corev1.PodFailed {
		s.Error = "the worker failed"
		return s, nil
	}
	logs, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{Container: "worker"}).DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("logs of %s: %w", pod.Name, err)
	}
	if err := s.readRun(logs); err != nil {
		s.Error = err.Error()
		return s, nil
	}
	evs, err := w.client.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err != nil {
		return s, err
	}
	for _, ev := range evs.Items {
		if m := pinEvent.FindStringSubmatch(ev.Message); m != nil && ev.Reason == "ExclusiveCPUs" {
			s.Pin = m[1]
		}
	}
	if s.Pin == "" {
		s.Error = "no ExclusiveCPUs event from the agent"
		return s, nil
	}
	s.PinnedAtInit = sameSet(s.AffinityAtInit, s.Pin)
	if w.ctr != "" && s.ContainerID != "" {
		if s.SpecCPUs, err = observe.SpecCPUs(ctx, w.ctr, w.containerd, s.ContainerID); err != nil {
			return s, err
		}
		s.SpecRead, s.SpecPinned = true, sameSet(s.SpecCPUs, s.Pin)
	}
	return s, nil
}

// readRun takes the affinities from fgworker's JSON output.
func (s *sample) readRun(logs []byte) error {
	run, err := fgresult.Parse(bytes.NewReader(logs))
	if err != nil {
		return err
	}
	if len(run.Processes) != 1 {
		return fmt.Errorf("fgworker ran %d processes, want 1", len(run.Processes))
	}
	s.AffinityAtInit, s.AffinityAtStart = run.Processes[0].AffinityAtInit, run.Processes[0].AffinityAtStart
	return nil
}

func sameSet(a, b string) bool {
	x, err1 := cpulist.Parse(a)
	y, err2 := cpulist.Parse(b)
	return err1 == nil && err2 == nil && x.Equals(y)
}

// workerPod is a Guaranteed one-CPU pinned pod that runs one fgworker rank briefly; the local
// cluster has no pod network. It runs about a second, so the agent's scan sees its cgroup.
func workerPod(name, image string, m mode) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"finegrain.dev/pinning": "exclusive"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			HostNetwork:   true,
			Containers: []corev1.Container{{
				Name: "worker", Image: image, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/usr/local/bin/fgworker", "dgemm", "-np", "1", "-n", "32", "-duration", "1s", "-o", "json"},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
	if m == modeInotify {
		p.Annotations = map[string]string{tolerateAnnotation: "true"}
	}
	return p
}

// trimRuntime drops the "containerd://" of a status container ID.
func trimRuntime(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}
