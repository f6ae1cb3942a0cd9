package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/bench/internal/loadgen"
)

// sampler takes a sample of the service every second: the decided size, the running pods' CPU
// limits and cumulative CPU use (their cgroups), and the Ready pods' addresses, across which the
// load is spread in turn (there is no kube-proxy on the local cluster).
type sampler struct {
	b        *bench
	ns, arm  string
	backends atomic.Pointer[[]string]
	next     atomic.Uint64

	mu      sync.Mutex
	samples []timedPoint
}

type timedPoint struct {
	at time.Time
	Point
}

func newSampler(b *bench, ns, arm string) *sampler {
	s := &sampler{b: b, ns: ns, arm: arm}
	s.backends.Store(&[]string{})
	return s
}

// loop samples every second until ctx is done.
func (s *sampler) loop(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.sample(ctx); err != nil && ctx.Err() == nil {
			return err
		}
	}
}

// sample takes one sample.
func (s *sampler) sample(ctx context.Context) error {
	at := time.Now()
	d, err := s.b.client.AppsV1().Deployments(s.ns).Get(ctx, serviceName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	p := Point{usage: map[string]float64{}}
	if d.Spec.Replicas != nil {
		p.Replicas = *d.Spec.Replicas
	}
	p.PodCPU = cores(d.Spec.Template.Spec.Containers[0].Resources.Limits.Cpu().MilliValue())
	switch s.arm {
	case armFinegrain:
		obj, err := getObjective(ctx, s.b.dyn, s.ns)
		if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		if obj.Status.PodSize != nil {
			p.PodCPU = cores(obj.Status.PodSize.CPU.MilliValue())
		}
		p.Note = obj.Status.LastDecision + ": " + obj.Status.LastDecisionReason
	case armHPA:
		h, err := s.b.client.AutoscalingV2().HorizontalPodAutoscalers(s.ns).Get(ctx, serviceName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		if u := hpaUtilization(h); u != nil {
			p.Note = fmt.Sprintf("CPU utilisation %d%% (target %d%%), desired replicas %d", *u, s.b.o.hpaTarget, h.Status.DesiredReplicas)
		}
	}
	pods, err := s.b.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + serviceName})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	var urls []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
			continue
		}
		used, err := s.b.podCPUSeconds(pod)
		if err != nil {
			// A pod that has just started or stopped may have no cgroup: it is sampled next time.
			continue
		}
		p.usage[string(pod.UID)] = used
		if pod.DeletionTimestamp == nil {
			p.Granted += cores(grantedMilli(pod))
		}
		if podReady(pod) {
			p.ReadyPods++
			urls = append(urls, "http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(servicePort))+"/work")
		}
	}
	s.backends.Store(&urls)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, timedPoint{at: at, Point: p})
	return nil
}

// points returns the samples with their times relative to start.
func (s *sampler) points(start time.Time) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Point, len(s.samples))
	for i, tp := range s.samples {
		out[i] = tp.Point
		out[i].T = tp.at.Sub(start).Seconds()
	}
	return out
}

// doer sends each request to the next Ready pod in turn; with none Ready the request fails.
func (s *sampler) doer(client *http.Client) loadgen.Doer {
	return func(ctx context.Context) error {
		urls := *s.backends.Load()
		if len(urls) == 0 {
			return errors.New("no Ready pod")
		}
		return loadgen.Get(ctx, client, urls[s.next.Add(1)%uint64(len(urls))])
	}
}

func cores(milli int64) float64 { return float64(milli) / 1000 }

// grantedMilli is the pod's CPU limit as the kubelet reports it applied (in-place resizes take
// effect there), or its spec's before the kubelet reports one.
func grantedMilli(pod *corev1.Pod) int64 {
	var milli int64
	for _, c := range pod.Spec.Containers {
		lim := c.Resources.Limits.Cpu().MilliValue()
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == c.Name && st.Resources != nil {
				lim = st.Resources.Limits.Cpu().MilliValue()
			}
		}
		milli += lim
	}
	return milli
}

// qosDir is where the kubelet's cgroupfs driver puts a pod of each QoS class below kubepods.
var qosDir = map[corev1.PodQOSClass]string{
	corev1.PodQOSGuaranteed: "",
	corev1.PodQOSBurstable:  "burstable",
	corev1.PodQOSBestEffort: "besteffort",
}

// podCPUSeconds reads the CPU time a pod's cgroup has used: cpuacct.usage (nanoseconds) on
// cgroup v1, usage_usec of cpu.stat on v2. The path comes from the node's cgroupRoot (the
// bench's flag), the pod's QoS class and its UID as the API server reports them.
func (b *bench) podCPUSeconds(pod *corev1.Pod) (float64, error) {
	root, ok := b.o.cgroupRoots[pod.Spec.NodeName]
	if !ok {
		return 0, fmt.Errorf("pod %s/%s is on node %s, which -cgroup-roots does not name", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	qos, ok := qosDir[pod.Status.QOSClass]
	uid := string(pod.UID)
	if !ok || uid == "" || strings.ContainsAny(uid, "/.") {
		return 0, fmt.Errorf("pod %s/%s: QoS class %q, UID %q", pod.Namespace, pod.Name, pod.Status.QOSClass, uid)
	}
	rel := filepath.Join(root, "kubepods", qos, "pod"+uid)
	if _, err := os.Stat(filepath.Join(b.o.cgroupFS, "cgroup.controllers")); err == nil {
		data, err := os.ReadFile(filepath.Join(b.o.cgroupFS, rel, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		return parseCPUStat(string(data))
	}
	data, err := os.ReadFile(filepath.Join(b.o.cgroupFS, "cpuacct", rel, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpuacct.usage of %s: %w", rel, err)
	}
	return float64(ns) / 1e9, nil
}

// parseCPUStat reads usage_usec from a cgroup v2 cpu.stat, in seconds.
func parseCPUStat(s string) (float64, error) {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu.stat: usage_usec %q: %w", v, err)
			}
			return float64(us) / 1e6, nil
		}
	}
	return 0, errors.New("cpu.stat has no usage_usec")
}
