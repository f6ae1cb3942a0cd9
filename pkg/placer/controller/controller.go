// Package controller owns the placer's control loop: it watches HPCJobs, pods, nodes and
// NodeResourceTopology objects through informers, keeps the gang queue, plans one gang at a
// time on a snapshot of the cluster (hpcjob and plan do the thinking), binds every pod of an
// accepted plan through the pods/binding subresource after writing the chosen NUMA node into
// its finegrain.dev/numa-node annotation, and reports job status, events and metrics. Elastic
// jobs are expanded when room appears and shrunk for higher-priority gangs.
//
// One goroutine (the loop) owns the queue, the assumptions and every HPCJob status write;
// informer handlers only mark keys dirty, and binding runs in background goroutines that report
// back to the loop. It must not choose CPUs (the node agent does) or touch any pod that does
// not name the placer as its scheduler, except the pods it creates for HPCJobs.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Options tune the controller.
type Options struct {
	// SchedulerName is the schedulerName of the pods the placer binds.
	SchedulerName string
	// Parallelism bounds concurrent API calls while binding.
	Parallelism int
	// GangTimeout is the timeout of plain pod gangs (HPCJobs give their own).
	GangTimeout time.Duration
	// InitialBackoff, MaxBackoff and ChangeDelay tune the queue's back-off (see queue.Options).
	InitialBackoff, MaxBackoff, ChangeDelay time.Duration
	// SnapshotTTL is how long one snapshot serves consecutive gangs before it is rebuilt from
	// the informers (placements made on it are recorded on it meanwhile).
	SnapshotTTL time.Duration
	// AssumeTTL is how long a bound pod the informer never shows is still assumed.
	AssumeTTL time.Duration
	// ResyncPeriod is the informers' resync period; every job is re-examined that often.
	ResyncPeriod time.Duration
	// RefusalGrace is how long a worker the node agent refused to pin may stay unpinned before
	// its job is placed again (the agent pins it by itself when CPUs free up meanwhile).
	RefusalGrace time.Duration
	// LauncherFailureGrace is how long a failed launcher waits for a worker's failure to reach
	// the placer before the run is blamed on the launcher (mpirun fails as soon as it loses a
	// worker; the worker's end is then the cause to report).
	LauncherFailureGrace time.Duration
	// SSHPorts is where the sshd ports of workers on their node's network come from.
	SSHPorts mpi.PortRange
	// ImagePullGrace is how long a job's pod may fail to pull its image (the kubelet retrying)
	// before the job fails; an image that can never be pulled fails it at once.
	ImagePullGrace time.Duration
	// TaskGroups is task-group scheduling (paper Algorithm 4's score); off, every node scores
	// alike and each worker goes to the job's placement policy's first node that fits it.
	TaskGroups bool
	// ShrinkScope says whose elastic jobs a waiting gang of strictly higher priority may shrink.
	ShrinkScope priority.Scope
	// Aging raises a waiting gang's priority with the time since it was submitted (its priority
	// per hour waited), so that gangs of higher priority submitted later cannot starve it: the
	// queue tries gangs in the order of their aged priorities, and completeJob grows no running
	// job that a waiting gang of higher aged priority would start before. Shrinking stays with
	// the gang's own priority: waiting gains no right to shrink another job. Off when zero.
	Aging elastic.Aging
	// Hooks calls the rescale hooks of elastic jobs (NewAPIHooks); New refuses nil.
	Hooks Hooks
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{
		SchedulerName:        v1alpha1.DefaultSchedulerName,
		Parallelism:          64,
		GangTimeout:          5 * time.Minute,
		InitialBackoff:       time.Second,
		MaxBackoff:           time.Minute,
		ChangeDelay:          200 * time.Millisecond,
		SnapshotTTL:          100 * time.Millisecond,
		AssumeTTL:            30 * time.Second,
		ResyncPeriod:         5 * time.Minute,
		RefusalGrace:         5 * time.Second,
		LauncherFailureGrace: 5 * time.Second,
		SSHPorts:             mpi.DefaultPortRange,
		ImagePullGrace:       2 * time.Minute,
		TaskGroups:           true,
		ShrinkScope:          priority.ScopeCluster,
	}
}

// Controller is the placer's control loop.
type Controller struct {
	opts     Options
	log      *slog.Logger
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	recorder events.EventRecorder
	metrics  *Metrics

	kubeInformers informers.SharedInformerFactory
	dynInformers  dynamicinformer.DynamicSharedInformerFactory
	// eventInformers watch only the node agent's refusal events.
	eventInformers informers.SharedInformerFactory
	pods           corelisters.PodLister
	podIndex       cache.Indexer
	nodes          corelisters.NodeLister
	nrts           cache.GenericLister
	jobs           cache.GenericLister
	classes        schedulinglisters.PriorityClassLister
	podGroups      cache.GenericLister
	synced         []cache.InformerSynced

	// Written by informer handlers, read by the loop.
	mu         sync.Mutex
	dirtyJobs  map[string]bool
	dirtyGangs map[string]bool
	// settled are pods the informer has shown bound (with their node) or deleted (node "").
	settled map[string]seen
	// refused are the node agent's refusal events by pod ("namespace/name").
	refused map[string]refusal
	changed bool
	wake    chan struct{}

	// cache is fed by the informer handlers and read by the loop.
	cache *snapshot.Cache

	// Owned by the loop.
	queue      *queue.Queue
	assumed    *assumptions
	snap       *snapshot.Snapshot
	snapAt     time.Time
	snapCost   time.Duration
	snapStale  bool
	inflight   map[string]*bindOp
	results    chan *bindOp
	jobStatus  map[string]writtenStatus
	lastReason map[string]string
	// refusals wait out their grace; replans counts each job's refusals.
	refusals map[string]refusal
	replans  map[string]int
	// timers are when jobs want to be looked at again (deadlines, image pulls, TTLs).
	timers map[string]time.Time
	// pullSince is when each pod was first seen failing to pull an image.
	pullSince map[string]time.Time
	// launcherFailed is when each job's launcher was first seen failed.
	launcherFailed map[string]time.Time
	// deprecated are the pods warned of the deprecated gang label, by gang and pod name.
	deprecated map[string]map[string]types.UID
	// admissions are the dry runs of jobs' pods by job UID (podsAdmitted).
	admissions map[types.UID]admission
	// shrinks are the shrinks made for waiting gangs, by the victim's rescale key (waitsForShrink).
	shrinks  map[string]shrinkFor
	apiSlots chan struct{}
	binds    sync.WaitGroup
}

// gangIndex indexes pods the placer schedules by their gang key.
const gangIndex = "finegrain.dev/gang"

// New wires a controller to its clients. reg receives the metrics. It makes the controller's
// state, then its informers (watchInformers).
func New(kube kubernetes.Interface, dyn dynamic.Interface, recorder events.EventRecorder, reg prometheus.Registerer, log *slog.Logger, opts Options) (*Controller, error) {
	if opts.Hooks == nil {
		return nil, errors.New("placer controller: Options.Hooks is nil; give it NewAPIHooks")
	}
	c := &Controller{
		opts: opts, log: log, kube: kube, dyn: dyn, recorder: recorder, metrics: NewMetrics(reg),
		dirtyJobs:  map[string]bool{},
		dirtyGangs: map[string]bool{},
		settled:    map[string]seen{},
		refused:    map[string]refusal{},
		wake:       make(chan struct{}, 1),
		queue: queue.New(queue.Options{
			InitialBackoff: opts.InitialBackoff, MaxBackoff: opts.MaxBackoff, ChangeDelay: opts.ChangeDelay,
			Aging: opts.Aging,
		}),
		assumed:        newAssumptions(opts.AssumeTTL),
		cache:          snapshot.NewCache(opts.SchedulerName),
		inflight:       map[string]*bindOp{},
		results:        make(chan *bindOp, 64),
		jobStatus:      map[string]writtenStatus{},
		lastReason:     map[string]string{},
		refusals:       map[string]refusal{},
		replans:        map[string]int{},
		timers:         map[string]time.Time{},
		pullSince:      map[string]time.Time{},
		launcherFailed: map[string]time.Time{},
		admissions:     map[types.UID]admission{},
		deprecated:     map[string]map[string]types.UID{},
		shrinks:        map[string]shrinkFor{},
		apiSlots:       make(chan struct{}, max(opts.Parallelism, 1)),
	}
	if err := c.watchInformers(); err != nil {
		return nil, err
	}
	return c, nil
}

// watchInformers makes the informers (pods, nodes, NodeResourceTopology objects, HPCJobs and the
// node agent's refusal events), their listers, and the handlers that feed the snapshot cache and
// mark what changed.
func (c *Controller) watchInformers() error {
	c.kubeInformers = informers.NewSharedInformerFactory(c.kube, c.opts.ResyncPeriod)
	c.dynInformers = dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, c.opts.ResyncPeriod)
	c.eventInformers = informers.NewSharedInformerFactoryWithOptions(c.kube, c.opts.ResyncPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("reason", ReasonAgentRefused).String()
		}))

	podInf := c.kubeInformers.Core().V1().Pods()
	if err := podInf.Informer().SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("set up the pod informer: %w", err)
	}
	if err := podInf.Informer().AddIndexers(cache.Indexers{gangIndex: c.gangIndexFunc}); err != nil {
		return fmt.Errorf("set up the pod informer: %w", err)
	}
	c.pods, c.podIndex = podInf.Lister(), podInf.Informer().GetIndexer()
	c.nodes = c.kubeInformers.Core().V1().Nodes().Lister()
	nrtInf := c.dynInformers.ForResource(nrt.GroupVersionResource)
	jobInf := c.dynInformers.ForResource(v1alpha1.GroupVersionResource)
	c.nrts, c.jobs = nrtInf.Lister(), jobInf.Lister()
	classInf := c.kubeInformers.Scheduling().V1().PriorityClasses()
	c.classes = classInf.Lister()

	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.onPod(o, false) },
		UpdateFunc: func(_, o any) { c.onPod(o, false) },
		DeleteFunc: func(o any) { c.onPod(o, true) },
	})
	_, _ = c.kubeInformers.Core().V1().Nodes().Informer().AddEventHandler(c.feed(func(o any) {
		if n, ok := o.(*corev1.Node); ok {
			c.cache.SetNode(n)
		}
	}, c.cache.DeleteNode))
	_, _ = nrtInf.Informer().AddEventHandler(c.feed(func(o any) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			c.cache.SetTopology(u)
		}
	}, c.cache.DeleteTopology))
	_, _ = jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onJob,
		UpdateFunc: func(_, o any) { c.onJob(o) },
		DeleteFunc: c.onJob,
	})
	// A class made, changed or deleted changes the priority of every job naming it (or of every
	// job, for the default class): all of them are looked at again.
	_, _ = classInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.allJobsDirty() },
		UpdateFunc: func(any, any) { c.allJobsDirty() },
		DeleteFunc: func(any) { c.allJobsDirty() },
	})
	eventInf := c.eventInformers.Core().V1().Events().Informer()
	_, _ = eventInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEvent,
		UpdateFunc: func(_, o any) { c.onEvent(o) },
	})
	c.synced = []cache.InformerSynced{
		podInf.Informer().HasSynced, c.kubeInformers.Core().V1().Nodes().Informer().HasSynced,
		nrtInf.Informer().HasSynced, jobInf.Informer().HasSynced, eventInf.HasSynced, classInf.Informer().HasSynced,
	}
	c.watchPodGroups()
	return nil
}

// Informers returns the controller's pod, node and NodeResourceTopology caches for the loops that
// run beside it (the virtual cluster controller), so the placer holds one copy of the cluster's
// pods. Its pods carry no managed fields.
func (c *Controller) Informers() (informers.SharedInformerFactory, dynamicinformer.DynamicSharedInformerFactory) {
	return c.kubeInformers, c.dynInformers
}

// stripManagedFields keeps managed fields out of the pod cache (they are most of a pod's
// size). It returns a shallow copy rather than editing the object, which the informer's source
// may share.
func stripManagedFields(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok && len(p.ManagedFields) > 0 {
		stripped := *p
		stripped.ManagedFields = nil
		return &stripped, nil
	}
	return obj, nil
}

// gangKeyOf returns the gang a pod the placer schedules belongs to: its pod group (either label),
// or itself.
// Pods of HPCJobs are the job's business and belong to no plain gang.
func (c *Controller) gangKeyOf(p *corev1.Pod) (string, bool) {
	if p.Spec.SchedulerName != c.opts.SchedulerName || p.Labels[v1alpha1.LabelJob] != "" {
		return "", false
	}
	if g, _, ok := schedv1alpha1.GroupOf(p); ok {
		return snapshot.PodGroupKey(p.Namespace, g), true
	}
	return plan.PodKey(p.Namespace, p.Name), true
}

func (c *Controller) gangIndexFunc(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if k, ok := c.gangKeyOf(p); ok {
		return []string{k}, nil
	}
	return nil, nil
}

func (c *Controller) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Controller) markChanged() {
	c.mu.Lock()
	c.changed = true
	c.mu.Unlock()
	c.signal()
}

// feed returns the handlers of a cluster-scoped informer whose objects the snapshot cache
// takes (set an object added or updated, del the name of one deleted): each feeds the cache,
// the informer's store already holding the object, and marks the cluster changed.
func (c *Controller) feed(set func(any), del func(name string)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { set(o); c.markChanged() },
		UpdateFunc: func(_, o any) { set(o); c.markChanged() },
		DeleteFunc: func(o any) { del(deletedName(o)); c.markChanged() },
	}
}

// deletedName is the name of a deleted cluster-scoped object, as a delete handler gets it.
func deletedName(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName()
	}
	return ""
}

// onPod feeds the snapshot cache before it records what the informer showed: by the time the
// loop drops an assumption the informer caught up with, the cache holds the pod as bound.
func (c *Controller) onPod(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if deleted {
		c.cache.DeletePod(p.Namespace, p.Name)
	} else {
		c.cache.SetPod(p)
	}
	c.mu.Lock()
	if job := p.Labels[v1alpha1.LabelJob]; job != "" {
		c.dirtyJobs[p.Namespace+"/"+job] = true
	}
	if k, ok := c.gangKeyOf(p); ok {
		c.dirtyGangs[k] = true
	}
	if deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		c.changed = true
	}
	if deleted {
		c.settled[podKey(p)] = seen{uid: p.UID}
	} else if p.Spec.NodeName != "" {
		c.settled[podKey(p)] = seen{node: p.Spec.NodeName, uid: p.UID}
	}
	c.mu.Unlock()
	c.signal()
}

// allJobsDirty marks every HPCJob for a look.
func (c *Controller) allJobsDirty() {
	objs, _ := c.jobs.List(labels.Everything())
	c.mu.Lock()
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			c.dirtyJobs[m.GetNamespace()+"/"+m.GetName()] = true
		}
	}
	c.mu.Unlock()
	c.signal()
}

func (c *Controller) onJob(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.mu.Lock()
	c.dirtyJobs[u.GetNamespace()+"/"+u.GetName()] = true
	c.mu.Unlock()
	c.signal()
}

// Run starts the informers and runs the loop until ctx ends; it waits for bindings in flight
// before it returns. An end before the caches synced is a shutdown like any other, not an error.
// Once ctx has ended the loop makes no decision more: a binding or rescale that the cancellation
// cut short is left to the next leader, which finds it in the objects (interruptedRescale), and
// the stopping placer neither rolls it back nor writes about it.
func (c *Controller) Run(ctx context.Context) error {
	c.kubeInformers.Start(ctx.Done())
	c.dynInformers.Start(ctx.Done())
	c.eventInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	c.log.Info("placer caches synced", "scheduler", c.opts.SchedulerName)
	defer c.binds.Wait()
	for {
		if ctx.Err() != nil {
			return nil
		}
		c.drain(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.metrics.QueueLength.Set(float64(c.queue.Len()))
		c.metrics.Assumed.Set(float64(len(c.assumed.pods)))
		if c.scheduleOne(ctx) {
			continue
		}
		c.wait(ctx)
	}
}

// wait sleeps until something happens: an informer event, a finished binding, the next
// back-off expiring, a refusal's grace ending, or a job's wake-up time.
func (c *Controller) wait(ctx context.Context) {
	var timer <-chan time.Time
	at, ok := c.queue.WakeAt()
	if due, refused := c.refusalDue(); refused && (!ok || due.Before(at)) {
		at, ok = due, true
	}
	if due, timed := c.nextTimer(); timed && (!ok || due.Before(at)) {
		at, ok = due, true
	}
	if ok {
		t := time.NewTimer(max(time.Until(at), time.Millisecond))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
	case <-c.wake:
	case op := <-c.results:
		c.finish(ctx, op)
	case <-timer:
	}
}

// drain handles finished bindings and everything the informers marked dirty.
func (c *Controller) drain(ctx context.Context) {
	for {
		select {
		case op := <-c.results:
			c.finish(ctx, op)
			continue
		default:
		}
		break
	}
	c.mu.Lock()
	jobs, gangs, changed, settled, refused := c.dirtyJobs, c.dirtyGangs, c.changed, c.settled, c.refused
	c.dirtyJobs, c.dirtyGangs, c.changed, c.settled, c.refused = map[string]bool{}, map[string]bool{}, false, map[string]seen{}, map[string]refusal{}
	c.mu.Unlock()
	for k, r := range refused {
		c.refusals[k] = r
	}
	for k, s := range settled {
		c.assumed.settle(k, s)
	}
	if changed {
		c.queue.Changed()
		c.snapStale = true
	}
	for _, k := range c.dueTimers(time.Now()) {
		jobs[k] = true
	}
	for k := range jobs {
		if ctx.Err() != nil {
			return
		}
		c.syncJob(ctx, k)
	}
	for k := range gangs {
		c.syncGang(ctx, k)
	}
	c.checkRefusals(ctx, time.Now())
}
