package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Kinds of throughput round.
const (
	kindPods = "pods"
	kindJob  = "job"
)

// roundLabel marks the pods of one throughput round or gang phase.
const roundLabel = "finegrain.dev/bench-round"

// profileSeconds is how long the placer is profiled from its start.
const profileSeconds = 10

// benchPod is pod name of the benchmark: cpus exclusive CPUs and 1 GiB, the pinning label,
// allowed onto the fake nodes only, scheduled by scheduler.
func benchPod(name, round, scheduler string, cpus int) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{benchLabel: benchValue, roundLabel: round, v1alpha1.LabelPinning: v1alpha1.PinningExclusive},
		},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			NodeSelector:  map[string]string{benchLabel: benchValue},
			Tolerations:   []corev1.Toleration{toleration},
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
}

// binds records when the benchmark saw each pod of a round bound.
type binds struct {
	at map[string]time.Time
}

// watchBinds watches the pods of round from resourceVersion rv on, until want are bound or ctx
// ends; it returns when each was first seen with a node.
func watchBinds(ctx context.Context, kube kubernetes.Interface, round, rv string, want int) (*binds, error) {
	b := &binds{at: map[string]time.Time{}}
	for len(b.at) < want {
		w, err := kube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + round, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return b, fmt.Errorf("watch the pods of round %s: %w", round, err)
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type == watch.Bookmark || p.Spec.NodeName == "" {
				continue
			}
			if _, seen := b.at[p.Name]; !seen {
				b.at[p.Name] = time.Now()
				if len(b.at) == want {
					break
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return b, ctx.Err()
		}
	}
	return b, nil
}

// startWatch runs watchBinds in the background; wait returns its result.
func startWatch(ctx context.Context, kube kubernetes.Interface, round, rv string, want int) (wait func() (*binds, error)) {
	type result struct {
		b   *binds
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := watchBinds(ctx, kube, round, rv, want)
		done <- result{b, err}
	}()
	return func() (*binds, error) {
		r := <-done
		return r.b, r.err
	}
}

// roundResult is one scheduler's throughput round.
type roundResult struct {
	// Kind is kindPods (pending pods bound) or kindJob (a job submitted until its workers are
	// bound).
	Kind      string `json:"kind"`
	Scheduler string `json:"scheduler"`
	Round     int    `json:"round"`
	Pods      int    `json:"pods"`
	Bound     int    `json:"bound"`
	// FirstBind and LastBind are seconds from the scheduler's start.
	FirstBind float64 `json:"firstBindSeconds"`
	LastBind  float64 `json:"lastBindSeconds"`
	// Rate is pods bound per second from the scheduler's start; Steady over the 10th to 90th
	// percentile of bind times (without start-up and tail).
	Rate   float64 `json:"podsPerSecond"`
	Steady float64 `json:"steadyPodsPerSecond"`
	// Annotated counts pods bound with the NUMA node annotation (the placer's).
	Annotated int `json:"annotated"`
	// CPU is the CPU time the scheduler process used from its start to its stop after the last
	// bind, in seconds: its own cost, whatever the API server it shares the machine with allows.
	CPU float64 `json:"schedulerCPUSeconds"`
}

// cpuPerPod is the scheduler's CPU time per bound pod in milliseconds.
func (r *roundResult) cpuPerPod() float64 {
	if r.Bound == 0 {
		return math.NaN()
	}
	return r.CPU * 1000 / float64(r.Bound)
}

// throughputRound creates o.pods pending pods for one scheduler, starts it, and measures how
// fast it binds them; then stops it and deletes the pods.
func throughputRound(ctx context.Context, kube kubernetes.Interface, o *options, log *slog.Logger, placer bool, round int, profile string) (*roundResult, error) {
	sched, name := kubeName, "kube-scheduler"
	if placer {
		sched, name = placerName, "placer"
	}
	tag := fmt.Sprintf("%s-%d", name, round)
	err := parallel(o.pods, 32, func(i int) error {
		_, err := kube.CoreV1().Pods(namespace).Create(ctx, benchPod(fmt.Sprintf("%s-%05d", tag, i), tag, sched, 1), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create the pods of round %s: %w", tag, err)
	}
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + tag})
	if err != nil {
		return nil, fmt.Errorf("list the pods of round %s: %w", tag, err)
	}
	log.Info("pods created; starting the scheduler", "round", tag, "pods", len(list.Items))

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	wait := startWatch(wctx, kube, tag, list.ResourceVersion, o.pods)
	t0 := time.Now()
	p, err := startScheduler(o, placer)
	if err != nil {
		return nil, err
	}
	profiled := make(chan struct{})
	if profile != "" {
		go func() {
			defer close(profiled)
			writeProfile(wctx, filepath.Join(o.outDir, profile), log)
		}()
	} else {
		close(profiled)
	}
	b, err := wait()
	<-profiled
	p.stop()
	res := summarize(name, round, o.pods, t0, b)
	res.CPU = p.cpu().Seconds()
	res.Kind = kindPods
	if err == nil && placer {
		res.Annotated, err = annotated(ctx, kube, tag)
	}
	if derr := deletePods(ctx, kube, tag); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return res, fmt.Errorf("round %s: %d of %d pods bound: %w", tag, res.Bound, o.pods, err)
	}
	return res, nil
}

// summarize turns bind times into a round's rates.
func summarize(name string, round, pods int, t0 time.Time, b *binds) *roundResult {
	r := &roundResult{Scheduler: name, Round: round, Pods: pods}
	if b == nil || len(b.at) == 0 {
		return r
	}
	times := make([]float64, 0, len(b.at))
	for _, t := range b.at {
		times = append(times, t.Sub(t0).Seconds())
	}
	slices.Sort(times)
	r.Bound = len(times)
	r.FirstBind, r.LastBind = times[0], times[len(times)-1]
	if r.LastBind > 0 {
		r.Rate = float64(r.Bound) / r.LastBind
	}
	lo, hi := times[len(times)/10], times[len(times)*9/10]
	if n := len(times)*9/10 - len(times)/10; hi > lo && n > 0 {
		r.Steady = float64(n) / (hi - lo)
	}
	return r
}

// annotated counts the bound pods of a round that carry the NUMA node annotation.
func annotated(ctx context.Context, kube kubernetes.Interface, round string) (int, error) {
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + round})
	if err != nil {
		return 0, fmt.Errorf("list the pods of round %s: %w", round, err)
	}
	n := 0
	for _, p := range list.Items {
		if _, ok := p.Annotations[v1alpha1.AnnotationNUMANode]; ok && p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// deletePods removes a round's pods and waits until they are gone.
func deletePods(ctx context.Context, kube kubernetes.Interface, round string) error {
	return deleteSelected(ctx, kube, roundLabel+"="+round, "the pods of round "+round)
}

// deleteSelected deletes the benchmark namespace's pods that selector matches, 32 at a time and
// at once (no grace period), and waits until they are gone. One DeleteCollection of thousands of
// pods can outlast the API server's request timeout on this machine and fail half done.
func deleteSelected(ctx context.Context, kube kubernetes.Interface, selector, what string) error {
	sel := metav1.ListOptions{LabelSelector: selector}
	list, err := kube.CoreV1().Pods(namespace).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list %s: %w", what, err)
	}
	zero := int64(0)
	err = parallel(len(list.Items), 32, func(i int) error {
		name := list.Items[i].Name
		err := kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	return poll(ctx, 5*time.Minute, what+" gone", func() (bool, error) {
		list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
		return err == nil && len(list.Items) == 0, err
	})
}

// writeProfile saves a CPU profile of the placer's first profileSeconds, taken from its
// /debug/pprof as soon as it listens.
func writeProfile(ctx context.Context, file string, log *slog.Logger) {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", placerMetrics, profileSeconds)
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			f.Close()
		}
		if err != nil {
			log.Warn("placer profile not written", "file", file, "err", err)
			return
		}
		log.Info("placer profile written", "file", file)
		return
	}
}
