package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

const gangRound = "gangs"

// gangResult is how long competing gangs waited to be placed.
type gangResult struct {
	Gangs       int `json:"gangs"`
	PodsPerGang int `json:"podsPerGang"`
	CPUsPerPod  int `json:"cpusPerPod"`
	Nodes       int `json:"nodes"`
	// FitAtOnce is how many gangs the pool holds at the same time.
	FitAtOnce int     `json:"fitAtOnce"`
	Hold      float64 `json:"holdSeconds"`
	// Wait is each placed gang's time from its last pod's creation to its last pod bound, and
	// Spread from its first pod bound to its last, in seconds, sorted.
	Wait   []float64 `json:"waitSeconds"`
	Spread []float64 `json:"spreadSeconds"`
	// Span is from the first gang's creation to the last gang bound.
	Span float64 `json:"spanSeconds"`
}

// gangsAtOnce is how many gangs of pods × cpus exclusive CPUs the pool holds at once: whole pods
// per NUMA node, never more than a node's CPUs but the shared pool's one.
func gangsAtOnce(o *options) int {
	perNode := min(o.numaPerNode*(o.cpusNUMA/o.gangCPUs), (o.numaPerNode*o.cpusNUMA-1)/o.gangCPUs, 110)
	return o.gangNodes * perNode / o.gangPods
}

func gangName(g int) string { return fmt.Sprintf("gang-%02d", g) }

// gangPod is pod i of gang g: the benchmark's pod with the pod-group labels, restricted to the
// gangs' pool.
func gangPod(o *options, g, i int) *corev1.Pod {
	p := benchPod(fmt.Sprintf("%s-%03d", gangName(g), i), gangRound, placerName, o.gangCPUs)
	p.Labels[v1alpha1.LabelPodGroup] = gangName(g)
	p.Labels[v1alpha1.LabelPodGroupMinAvailable] = strconv.Itoa(o.gangPods)
	p.Spec.NodeSelector = map[string]string{poolLabel: poolGangs}
	return p
}

// gangTracker follows the gangs' pods: when each gang was complete, first and fully bound.
type gangTracker struct {
	mu        sync.Mutex
	created   map[string]time.Time
	bound     map[string]map[string]bool
	first     map[string]time.Time
	full      map[string]time.Time
	fullCount chan string
}

func (t *gangTracker) seen(p *corev1.Pod, pods int) {
	g := p.Labels[v1alpha1.LabelPodGroup]
	if g == "" || p.Spec.NodeName == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bound[g] == nil {
		t.bound[g] = map[string]bool{}
		t.first[g] = time.Now()
	}
	t.bound[g][p.Name] = true
	if _, done := t.full[g]; !done && len(t.bound[g]) == pods {
		t.full[g] = time.Now()
		t.fullCount <- g
	}
}

// gangPhase starts the placer, has it bind a probe pod (its caches are synced then), creates
// every gang at once and deletes each gang o.gangHold after it is bound, until all were placed:
//  1. start the placer and probe it;
//  2. watch the gangs' pods (watchGangs) and create them all (createGangs);
//  3. release each gang o.gangHold after it is bound (releaseGangs);
//  4. read when each gang was bound, and delete what is left.
func gangPhase(ctx context.Context, kube kubernetes.Interface, o *options, log *slog.Logger) (*gangResult, error) {
	p, err := startPlacer(o)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := probe(ctx, kube, o); err != nil {
		return nil, err
	}
	res := &gangResult{Gangs: o.gangs, PodsPerGang: o.gangPods, CPUsPerPod: o.gangCPUs, Nodes: o.gangNodes, FitAtOnce: gangsAtOnce(o), Hold: o.gangHold.Seconds()}
	t := &gangTracker{created: map[string]time.Time{}, bound: map[string]map[string]bool{}, first: map[string]time.Time{},
		full: map[string]time.Time{}, fullCount: make(chan string, o.gangs)}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	stop, err := watchGangs(pctx, kube, t, o.gangPods)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	if err := createGangs(pctx, kube, o, t); err != nil {
		return nil, err
	}
	log.Info("gangs created", "gangs", o.gangs, "pods", o.gangs*o.gangPods, "fitAtOnce", res.FitAtOnce, "took", time.Since(start).Round(time.Millisecond).String())
	err = releaseGangs(ctx, pctx, kube, o, t, p, log)
	t.mu.Lock()
	for g, full := range t.full {
		res.Wait = append(res.Wait, full.Sub(t.created[g]).Seconds())
		res.Spread = append(res.Spread, full.Sub(t.first[g]).Seconds())
		res.Span = max(res.Span, full.Sub(start).Seconds())
	}
	t.mu.Unlock()
	slices.Sort(res.Wait)
	slices.Sort(res.Spread)
	if derr := deletePods(ctx, kube, gangRound); derr != nil && err == nil {
		err = derr
	}
	return res, err
}

// watchGangs feeds the tracker every gang pod the API server shows bound; stop ends the watch.
func watchGangs(ctx context.Context, kube kubernetes.Interface, t *gangTracker, podsPerGang int) (stop func(), err error) {
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + gangRound})
	if err != nil {
		return nil, fmt.Errorf("list the gangs' pods: %w", err)
	}
	w, err := kube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + gangRound, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch the gangs' pods: %w", err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				t.seen(pod, podsPerGang)
			}
		}
	}()
	return w.Stop, nil
}

// createGangs creates every gang's pods, recording when each gang was complete.
func createGangs(ctx context.Context, kube kubernetes.Interface, o *options, t *gangTracker) error {
	return parallel(o.gangs*o.gangPods, 32, func(i int) error {
		g := i / o.gangPods
		if _, err := kube.CoreV1().Pods(namespace).Create(ctx, gangPod(o, g, i%o.gangPods), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %d of %s: %w", i%o.gangPods, gangName(g), err)
		}
		now := time.Now()
		t.mu.Lock()
		if now.After(t.created[gangName(g)]) {
			t.created[gangName(g)] = now
		}
		t.mu.Unlock()
		return nil
	})
}

// releaseGangs deletes each gang o.gangHold after it is fully bound, until every gang was, the
// phase's time (pctx) is up, or the placer exits.
func releaseGangs(ctx, pctx context.Context, kube kubernetes.Interface, o *options, t *gangTracker, p *proc, log *slog.Logger) error {
	var holds sync.WaitGroup
	defer holds.Wait()
	for done := 0; done < o.gangs; done++ {
		select {
		case g := <-t.fullCount:
			holds.Add(1)
			go func() {
				defer holds.Done()
				time.Sleep(o.gangHold)
				if err := deleteSelected(ctx, kube, v1alpha1.LabelPodGroup+"="+g, "gang "+g); err != nil {
					log.Warn("bound gang not deleted", "gang", g, "err", err)
				}
			}()
		case <-pctx.Done():
			return fmt.Errorf("%d of %d gangs placed within %v", done, o.gangs, o.timeout)
		}
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// probe has the placer bind one pod, which shows its caches are synced, and deletes it.
func probe(ctx context.Context, kube kubernetes.Interface, o *options) error {
	pod := benchPod("probe", "probe", placerName, 1)
	if _, err := kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the probe pod: %w", err)
	}
	err := poll(ctx, 2*time.Minute, "the placer to bind its probe pod", func() (bool, error) {
		p, err := kube.CoreV1().Pods(namespace).Get(ctx, "probe", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	if derr := deletePods(ctx, kube, "probe"); derr != nil && err == nil {
		err = derr
	}
	return err
}
