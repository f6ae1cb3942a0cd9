// Package vcluster runs finegrain's VirtualCluster controller inside the placer, under the
// placer's Lease (docs/slurm.md): per VirtualCluster it keeps a munge key Secret, an SSH identity
// Secret, a ConfigMap with the generated slurm.conf, cgroup.conf, job_submit.lua and ssh client
// configuration (pkg/slurm/clusterconf), a slurmctld pod on one spanned node and a node pod
// (slurmd, sshd, munged) on every spanned node, all on their nodes' network with ports assigned to
// the virtual cluster alone; it reports the node pods, the Slurm node states and jobs (read by
// running sinfo and squeue in the slurmctld pod) and a Ready condition.
//
// It acts only on objects it made: every one carries the VirtualCluster as controlling owner
// (UID checked), a look-alike it does not own is reported and left alone, and deletion is the
// garbage collector's through those owner references. Its pods are not pinned: they run in the
// nodes' shared pool and never name the placer as their scheduler.
package vcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Options tune the controller.
type Options struct {
	// Ports is where each virtual cluster's block of PortBlock ports comes from (the placer's
	// --slurm-port-range).
	Ports mpi.PortRange
	// StatusPeriod is how often each virtual cluster's Slurm is asked for its nodes and jobs.
	StatusPeriod time.Duration
	// ExecTimeout bounds one sinfo or squeue run in the slurmctld pod.
	ExecTimeout time.Duration
	// ResyncPeriod is the informers' resync period.
	ResyncPeriod time.Duration
}

// DefaultPortRange lies above the SSH ports of HPCJob workers (mpi.DefaultPortRange) and below
// Linux's ephemeral ports: 62 virtual clusters.
var DefaultPortRange = mpi.PortRange{First: 21000, Last: 21999}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{Ports: DefaultPortRange, StatusPeriod: 10 * time.Second, ExecTimeout: 15 * time.Second, ResyncPeriod: 5 * time.Minute}
}

// Execer runs a command in a pod's container and returns its standard output.
type Execer interface {
	Exec(ctx context.Context, pod *corev1.Pod, container string, command []string) ([]byte, error)
}

// Informers are the caches the controller shares with the placer's controller: pods, nodes and
// NodeResourceTopology objects come from its factories, so the placer keeps one copy of the
// cluster's pods, not two. The VirtualCluster informer stays the controller's own, started only
// once the API serves VirtualClusters.
type Informers struct {
	Kube    informers.SharedInformerFactory
	Dynamic dynamicinformer.DynamicSharedInformerFactory
}

// Controller is the VirtualCluster controller.
type Controller struct {
	opts     Options
	log      *slog.Logger
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	exec     Execer
	recorder events.EventRecorder

	shared       Informers
	dynInformers dynamicinformer.DynamicSharedInformerFactory
	clusters     cache.GenericLister
	nrts         cache.GenericLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]

	// waiting is true while the VirtualCluster API is not served.
	waiting atomic.Bool

	// ports are the blocks this process assigned, by "namespace/name": the informer may not show
	// a status it has just written when the next virtual cluster takes its ports.
	mu    sync.Mutex
	ports map[string]v1alpha1.VirtualClusterPorts
}

// New makes the controller on the shared caches; exec runs sinfo and squeue in slurmctld pods
// (NewAPIExecer).
func New(kube kubernetes.Interface, dyn dynamic.Interface, shared Informers, exec Execer, recorder events.EventRecorder, log *slog.Logger, opts Options) *Controller {
	c := &Controller{
		opts: opts, log: log, kube: kube, dyn: dyn, exec: exec, recorder: recorder,
		shared:       shared,
		dynInformers: dynamicinformer.NewDynamicSharedInformerFactory(dyn, opts.ResyncPeriod),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "virtualclusters"}),
		ports: map[string]v1alpha1.VirtualClusterPorts{},
	}
	c.waiting.Store(true)
	vcs := c.dynInformers.ForResource(v1alpha1.VirtualClusterGroupVersionResource)
	nrtInf := shared.Dynamic.ForResource(nrt.GroupVersionResource)
	pods := shared.Kube.Core().V1().Pods()
	nodes := shared.Kube.Core().V1().Nodes()
	c.clusters, c.nrts, c.pods, c.nodes = vcs.Lister(), nrtInf.Lister(), pods.Lister(), nodes.Lister()
	c.synced = []cache.InformerSynced{vcs.Informer().HasSynced, nrtInf.Informer().HasSynced, pods.Informer().HasSynced, nodes.Informer().HasSynced}
	_, _ = vcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObject,
		UpdateFunc: func(_, o any) { c.enqueueObject(o) },
		DeleteFunc: c.onDeleted,
	})
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPod,
		UpdateFunc: func(_, o any) { c.onPod(o) },
		DeleteFunc: c.onPod,
	})
	// A node that comes, goes or changes its labels changes whom virtual clusters span.
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: func(any) { c.enqueueAll() },
	})
	return c
}

// HasSynced reports whether every informer has listed once, or the controller waits for the
// VirtualCluster API (a placer without the CRD is ready to place).
func (c *Controller) HasSynced() bool {
	if c.waiting.Load() {
		return true
	}
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// apiPollPeriod is how often the controller looks for the VirtualCluster API while it is not
// served.
const apiPollPeriod = 10 * time.Second

// waitForAPI waits until the API server serves VirtualClusters (the CRD may be installed after
// the placer starts, or not at all); false when ctx ended first.
func (c *Controller) waitForAPI(ctx context.Context) bool {
	for logged := false; ; logged = true {
		list, err := c.kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
		if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == v1alpha1.VirtualClusterResource }) {
			c.waiting.Store(false)
			return true
		}
		if !logged {
			c.log.Info("the VirtualCluster API is not served; the virtual cluster controller waits for it (kubectl apply -f daemonset/placer/crd-virtualcluster.yaml)")
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(apiPollPeriod):
		}
	}
}

// Run waits for the VirtualCluster API, starts the informers and reconciles virtual clusters one
// at a time until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !c.waitForAPI(ctx) {
		return nil
	}
	c.shared.Kube.Start(ctx.Done())
	c.shared.Dynamic.Start(ctx.Done())
	c.dynInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.Info("virtual cluster caches synced", "slurmPortRange", c.opts.Ports.String())
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for {
		key, quit := c.queue.Get()
		if quit {
			return nil
		}
		err := c.reconcile(ctx, key)
		c.queue.Done(key)
		switch {
		case errors.Is(err, errGone):
			c.queue.Forget(key)
		case err != nil:
			c.log.Info("virtual cluster not reconciled; retrying", "virtualCluster", key, "err", err)
			c.queue.AddRateLimited(key)
		default:
			c.queue.Forget(key)
			c.queue.AddAfter(key, c.opts.StatusPeriod)
		}
	}
}

func (c *Controller) enqueueObject(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c.queue.Add(u.GetNamespace() + "/" + u.GetName())
	}
}

func (c *Controller) onDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c.mu.Lock()
		delete(c.ports, u.GetNamespace()+"/"+u.GetName())
		c.mu.Unlock()
	}
}

func (c *Controller) onPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		if name := p.Labels[v1alpha1.LabelVirtualCluster]; name != "" {
			c.queue.Add(p.Namespace + "/" + name)
		}
	}
}

func (c *Controller) onNodeUpdate(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 || fmt.Sprint(o.Labels) != fmt.Sprint(n.Labels) || o.Spec.Unschedulable != n.Spec.Unschedulable {
		c.enqueueAll()
	}
}

func (c *Controller) enqueueAll() {
	objs, err := c.clusters.List(everything)
	if err != nil {
		return
	}
	for _, o := range objs {
		c.enqueueObject(o)
	}
}
