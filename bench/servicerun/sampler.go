package servicerun

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/internal/loadgen"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Sampler takes a sample of a Deployment every second: the decided size, the running pods' CPU
// limits and cumulative CPU use, and the Ready pods' addresses, across which its Doer spreads
// the load in turn (the local cluster has no kube-proxy).
type Sampler struct {
	Client kubernetes.Interface
	// Namespace and Name are the Deployment's; its pods carry the label app=Name.
	Namespace, Name string
	// Port and Path are where a pod serves the load's requests.
	Port int
	Path string
	// Decided reads what the autoscaler decided: the CPU per pod in cores (0: the template's)
	// and a note for the series. Nil: no autoscaler.
	Decided func(ctx context.Context) (podCPU float64, note string, err error)
	// CPUSeconds reads a pod's cumulative CPU time; a pod it fails for (no cgroup yet or any
	// more) is left out of that sample.
	CPUSeconds func(*corev1.Pod) (float64, error)

	backends atomic.Pointer[[]string]
	next     atomic.Uint64

	mu      sync.Mutex
	samples []timedPoint
}

type timedPoint struct {
	at time.Time
	Point
}

// Loop samples every second until ctx is done.
func (s *Sampler) Loop(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			return err
		}
	}
}

// Sample takes one sample.
func (s *Sampler) Sample(ctx context.Context) error {
	at := time.Now()
	d, err := s.Client.AppsV1().Deployments(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	p := Point{usage: map[string]float64{}}
	if d.Spec.Replicas != nil {
		p.Replicas = *d.Spec.Replicas
	}
	p.PodCPU = cores(d.Spec.Template.Spec.Containers[0].Resources.Limits.Cpu().MilliValue())
	if s.Decided != nil {
		cpu, note, err := s.Decided(ctx)
		if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		if cpu > 0 {
			p.PodCPU = cpu
		}
		p.Note = note
	}
	pods, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + s.Name})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	var urls []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
			continue
		}
		used, err := s.CPUSeconds(pod)
		if err != nil {
			// A pod that has just started or stopped may have no cgroup: it is sampled next time.
			continue
		}
		p.usage[string(pod.UID)] = used
		if pod.DeletionTimestamp == nil {
			p.Granted += cores(grantedMilli(pod))
		}
		if PodReady(pod) {
			p.ReadyPods++
			urls = append(urls, "http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(s.Port))+s.Path)
		}
	}
	s.backends.Store(&urls)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, timedPoint{at: at, Point: p})
	return nil
}

// Points returns the samples with their times relative to start.
func (s *Sampler) Points(start time.Time) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Point, len(s.samples))
	for i, tp := range s.samples {
		out[i] = tp.Point
		out[i].T = tp.at.Sub(start).Seconds()
	}
	return out
}

// Doer sends each request to the next Ready pod of the last sample in turn; with none Ready the
// request fails.
func (s *Sampler) Doer(client *http.Client) loadgen.Doer {
	return func(ctx context.Context) error {
		p := s.backends.Load()
		if p == nil || len(*p) == 0 {
			return errors.New("no Ready pod")
		}
		urls := *p
		return loadgen.Get(ctx, client, urls[s.next.Add(1)%uint64(len(urls))])
	}
}

// PodReady says whether a pod receives load: Ready, with an IP, not being deleted.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Objective reads the ServiceObjective ns/name.
func Objective(ctx context.Context, dyn dynamic.Interface, ns, name string) (*v1alpha1.ServiceObjective, error) {
	u, err := dyn.Resource(v1alpha1.ServiceObjectiveGroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var obj v1alpha1.ServiceObjective
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return nil, fmt.Errorf("ServiceObjective %s/%s: %w", ns, name, err)
	}
	return &obj, nil
}

// ObjectiveDecided is a Sampler's Decided for a service the ServiceObjective ns/name resizes:
// the CPU per pod of its status and its last decision with the reason.
func ObjectiveDecided(dyn dynamic.Interface, ns, name string) func(context.Context) (float64, string, error) {
	return func(ctx context.Context) (float64, string, error) {
		obj, err := Objective(ctx, dyn, ns, name)
		if err != nil {
			return 0, "", err
		}
		cpu := 0.0
		if obj.Status.PodSize != nil {
			cpu = cores(obj.Status.PodSize.CPU.MilliValue())
		}
		return cpu, obj.Status.LastDecision + ": " + obj.Status.LastDecisionReason, nil
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

// CgroupCPUSeconds is a Sampler's CPUSeconds for pods of nodes whose kubelets use the cgroupfs
// driver: roots maps each node to its kubelet's cgroupRoot (without slashes around it; "" for
// /), cgroupFS is where the hierarchies are mounted. It reads the pod cgroup's cpuacct.usage
// (nanoseconds) on cgroup v1, usage_usec of cpu.stat on v2; the path comes from the node's
// cgroupRoot, the pod's QoS class and its UID as the API server reports them.
func CgroupCPUSeconds(cgroupFS string, roots map[string]string) func(*corev1.Pod) (float64, error) {
	return func(pod *corev1.Pod) (float64, error) {
		root, ok := roots[pod.Spec.NodeName]
		if !ok {
			return 0, fmt.Errorf("pod %s/%s is on node %s, whose cgroup root is not known", pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		qos, ok := qosDir[pod.Status.QOSClass]
		uid := string(pod.UID)
		if !ok || uid == "" || strings.ContainsAny(uid, "/.") {
			return 0, fmt.Errorf("pod %s/%s: QoS class %q, UID %q", pod.Namespace, pod.Name, pod.Status.QOSClass, uid)
		}
		rel := filepath.Join(root, "kubepods", qos, "pod"+uid)
		if _, err := os.Stat(filepath.Join(cgroupFS, "cgroup.controllers")); err == nil {
			data, err := os.ReadFile(filepath.Join(cgroupFS, rel, "cpu.stat"))
			if err != nil {
				return 0, err
			}
			return parseCPUStat(string(data))
		}
		data, err := os.ReadFile(filepath.Join(cgroupFS, "cpuacct", rel, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpuacct.usage of %s: %w", rel, err)
		}
		return float64(ns) / 1e9, nil
	}
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
