package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// results is everything one run measured.
type results struct {
	Nodes       int            `json:"nodes"`
	NUMAPerNode int            `json:"numaPerNode"`
	CPUsPerNUMA int            `json:"cpusPerNUMA"`
	QPS         float64        `json:"qps"`
	Burst       int            `json:"burst"`
	NodesReady  float64        `json:"nodesReadySeconds"`
	Rounds      []*roundResult `json:"rounds"`
	Gangs       *gangResult    `json:"gangs,omitempty"`
	Started     time.Time      `json:"started"`
}

// benchmark adds the fake nodes, runs the throughput rounds and the gang phase, and removes
// everything it made, whatever happened:
//  1. make the API clients (clients) and check the cluster (preflight);
//  2. start kwok, make the namespace and the fake nodes;
//  3. run the rounds and the gang phase (runRounds);
//  4. stop kwok and remove the nodes, their objects and the namespace.
func benchmark(ctx context.Context, o *options, log *slog.Logger) (res *results, err error) {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("make %s: %w", o.outDir, err)
	}
	kube, dyn, err := clients(o)
	if err != nil {
		return nil, err
	}
	if err := preflight(ctx, kube, dyn, log); err != nil {
		return nil, err
	}
	res = &results{Nodes: o.nodes, NUMAPerNode: o.numaPerNode, CPUsPerNUMA: o.cpusNUMA, QPS: o.qps, Burst: o.burst, Started: time.Now().UTC()}

	kwok, err := startKwok(o)
	if err != nil {
		return nil, err
	}
	defer func() {
		kwok.stop()
		if cerr := removeAll(kube, dyn); cerr != nil {
			err = errors.Join(err, cerr)
		}
		log.Info("fake nodes, their objects, the namespace and the processes removed")
	}()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{benchLabel: benchValue}}}, metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	t0 := time.Now()
	if err := addNodes(ctx, kube, dyn, o); err != nil {
		return res, errors.Join(err, kwok.exited())
	}
	res.NodesReady = time.Since(t0).Seconds()
	log.Info("fake nodes Ready", "nodes", o.nodes, "took", time.Since(t0).Round(time.Second).String())
	if err := runRounds(ctx, kube, dyn, o, log, res); err != nil {
		return res, errors.Join(err, kwok.exited())
	}
	return res, nil
}

// clients makes the benchmark's API clients, allowed far more requests than the schedulers
// under test.
func clients(o *options) (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("read kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = 2000, 4000, "placerscale"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("make API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("make dynamic API client: %w", err)
	}
	return kube, dyn, nil
}

// runRounds runs the throughput rounds, the job rounds and the gang phase into res. Placer and
// kube-scheduler alternate (P K K P ...), so that a drift of the shared machine's load over the
// run weighs on both alike.
func runRounds(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, o *options, log *slog.Logger, res *results) error {
	for r := range 2 * o.rounds {
		placer := r%4 == 0 || r%4 == 3
		profile := ""
		if placer && r == 0 {
			profile = o.profile
		}
		rr, err := throughputRound(ctx, kube, o, log, placer, r/2, profile)
		if rr != nil {
			res.Rounds = append(res.Rounds, rr)
			log.Info("round done", "scheduler", rr.Scheduler, "bound", rr.Bound, "podsPerSecond", fmt.Sprintf("%.0f", rr.Rate))
		}
		if err != nil {
			return err
		}
	}
	for r := range 2 * o.jobRounds {
		placer := r%4 == 0 || r%4 == 3
		rr, err := jobRound(ctx, kube, dyn, o, log, placer, r/2)
		if rr != nil {
			res.Rounds = append(res.Rounds, rr)
		}
		if err != nil {
			return err
		}
	}
	if o.gangs > 0 {
		var err error
		if res.Gangs, err = gangPhase(ctx, kube, o, log); err != nil {
			return err
		}
	}
	return nil
}

// noDaemonSetOnFakeNodes refuses a cluster where a DaemonSet tolerates the fake nodes' taint (a
// node agent's usually tolerates everything): it would put a pod on each of them, and kwok's
// status writes for thousands of those swamp the API server before the nodes are Ready.
func noDaemonSetOnFakeNodes(ctx context.Context, kube kubernetes.Interface) error {
	dss, err := kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list DaemonSets: %w", err)
	}
	taint := corev1.Taint{Key: kwokKey, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}
	for _, ds := range dss.Items {
		for _, tol := range ds.Spec.Template.Spec.Tolerations {
			if tol.ToleratesTaint(logr.Discard(), &taint, true) {
				return fmt.Errorf("DaemonSet %s/%s tolerates the fake nodes' taint %s and would run a pod on each of them: "+
					"run the benchmark on a cluster without it (make cluster-down && make cluster-up gives one)", ds.Namespace, ds.Name, taint.ToString())
			}
		}
	}
	return nil
}

// preflight checks that the NodeResourceTopology API is served and that no DaemonSet would run
// on the fake nodes, and removes what an earlier, interrupted run left behind (its fake nodes and
// namespace, known by their label and name).
func preflight(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) error {
	if _, err := dyn.Resource(nrt.GroupVersionResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("the NodeResourceTopology API is not served (%w): install its CRD, kubectl apply -f daemonset/crds/noderesourcetopology.yaml", err)
	}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("the HPCJob API is not served (%w): install its CRD, kubectl apply -f daemonset/placer/crd-hpcjob.yaml", err)
	}
	if err := noDaemonSetOnFakeNodes(ctx, kube); err != nil {
		return err
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchSelector, Limit: 1})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	_, nserr := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if nserr != nil && !apierrors.IsNotFound(nserr) {
		return fmt.Errorf("look up namespace %s: %w", namespace, nserr)
	}
	leases, err := fakeLeases(ctx, kube)
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 && nserr != nil && len(leases) == 0 {
		return nil
	}
	log.Info("removing what an earlier run left behind", "nodes", benchSelector, "namespace", namespace, "leases", len(leases))
	if err := removeAll(kube, dyn); err != nil {
		return err
	}
	return poll(ctx, 3*time.Minute, "namespace "+namespace+" gone", func() (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
