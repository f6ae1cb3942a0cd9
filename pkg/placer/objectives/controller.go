// Package objectives runs finegrain's service objective loop (Genisys's feedback loop) inside the
// placer, under the placer's Lease: every spec.periodSeconds per ServiceObjective it reads the
// objective's metric (pkg/objective/measure), decides the next size (pkg/objective), resizes the
// target's pods in place through their resize subresource and sets the target's replicas through
// its scale subresource, and writes the objective's status, events and metrics. The decided size
// in status.podSize (CPU, memory, I/O bandwidth per pod) is authoritative: the node agent reads
// its ioBandwidth for the pods of the target.
//
// It resizes only pods that the objective's Deployment or StatefulSet controls (through their
// controller ownerReferences, UIDs checked), fetches metrics only from those pods' IPs as the API
// server reports them or from query APIs the operator allowed (Options.AllowedQueryURLs), and
// never chooses a node or a CPU: new replicas are placed by whatever schedules the target's pods
// (the placer itself when their schedulerName names it).
package objectives

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective/measure"
)

// Options tune the loop.
type Options struct {
	// AllowedQueryURLs are the base URLs of the Prometheus-compatible query APIs objectives may
	// name in metric.source.query.url (the placer's --objective-query-urls). An objective naming
	// any other gets Valid=False, reason SourceNotAllowed, and is left alone. Empty: none.
	AllowedQueryURLs []string
	// Parallelism bounds the objectives measured and resized at once.
	Parallelism int
	// ResyncPeriod is the informer's resync period.
	ResyncPeriod time.Duration
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{Parallelism: 16, ResyncPeriod: 5 * time.Minute}
}

// Controller is the service objective loop.
type Controller struct {
	opts     Options
	allowed  []allowedURL
	log      *slog.Logger
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	recorder events.EventRecorder
	metrics  *Metrics
	http     *http.Client

	informers dynamicinformer.DynamicSharedInformerFactory
	objects   cache.GenericLister
	synced    cache.InformerSynced
	// waiting is true until the API server serves ServiceObjectives.
	waiting atomic.Bool
	// resizeServed says whether the API server serves pods/resize (in-place pod resize,
	// InPlacePodVerticalScaling); without it services grow by replicas only. Set before the
	// informer starts.
	resizeServed bool

	// dirty are the objectives the informer showed changed, by "namespace/name"; pace is when
	// each one's next period is due and until when its checks are off.
	mu    sync.Mutex
	dirty map[string]bool
	pace  map[string]pace
	wake  chan struct{}

	// Owned by the loop: when each objective is next due, its generation then, and which are
	// being reconciled.
	due        map[string]time.Time
	generation map[string]int64
	inflight   map[string]bool
	done       chan result
}

// result is what one reconcile hands back to the loop.
type result struct {
	key  string
	next time.Time
}

// New makes the loop; reg receives its metrics. It fails when an allowed query URL is not an
// http(s) base URL.
func New(kube kubernetes.Interface, dyn dynamic.Interface, recorder events.EventRecorder, reg prometheus.Registerer, log *slog.Logger, opts Options) (*Controller, error) {
	allowed, err := parseAllowed(opts.AllowedQueryURLs)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts: opts, allowed: allowed, log: log, kube: kube, dyn: dyn, recorder: recorder,
		metrics:    NewMetrics(reg),
		http:       measure.NewClient(),
		dirty:      map[string]bool{},
		pace:       map[string]pace{},
		wake:       make(chan struct{}, 1),
		due:        map[string]time.Time{},
		generation: map[string]int64{},
		inflight:   map[string]bool{},
		done:       make(chan result, max(opts.Parallelism, 1)),
	}
	c.waiting.Store(true)
	c.informers = dynamicinformer.NewDynamicSharedInformerFactory(dyn, opts.ResyncPeriod)
	inf := c.informers.ForResource(v1alpha1.ServiceObjectiveGroupVersionResource)
	c.objects, c.synced = inf.Lister(), inf.Informer().HasSynced
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onObjective,
		UpdateFunc: func(_, o any) { c.onObjective(o) },
		DeleteFunc: c.onObjective,
	})
	return c, nil
}

// HasSynced reports whether the objective informer has listed once, or the loop waits for the
// ServiceObjective API (a placer without the CRD is ready to place).
func (c *Controller) HasSynced() bool { return c.waiting.Load() || c.synced() }

// apiPollPeriod is how often the loop looks for the ServiceObjective API while it is not served.
const apiPollPeriod = 10 * time.Second

// waitForAPI waits until the API server serves ServiceObjectives (the CRD may be installed after
// the placer starts, or not at all); false when ctx ended first.
func (c *Controller) waitForAPI(ctx context.Context) bool {
	for logged := false; ; logged = true {
		list, err := c.kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
		if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
			return r.Name == v1alpha1.ServiceObjectiveResource
		}) {
			c.resizeServed = c.servesResize()
			c.waiting.Store(false)
			return true
		}
		if !logged {
			c.log.Info("the ServiceObjective API is not served; the service objective loop waits for it (kubectl apply -f daemonset/placer/crd-serviceobjective.yaml)")
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(apiPollPeriod):
		}
	}
}

func (c *Controller) onObjective(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.mu.Lock()
	c.dirty[u.GetNamespace()+"/"+u.GetName()] = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// servesResize says whether the API server serves pods/resize.
func (c *Controller) servesResize() bool {
	list, err := c.kube.Discovery().ServerResourcesForGroupVersion("v1")
	served := err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" })
	if !served {
		c.log.Warn("the API server does not serve pods/resize (in-place pod resize, feature gate InPlacePodVerticalScaling): service objectives grow and shrink by replicas only", "err", err)
	}
	return served
}

// Run waits for the ServiceObjective API, starts the informer and runs the loop until ctx ends;
// it waits for the reconciles in flight before it returns.
func (c *Controller) Run(ctx context.Context) error {
	if !c.waitForAPI(ctx) {
		return nil
	}
	c.informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return ctx.Err()
	}
	c.log.Info("service objective caches synced", "allowedQueryURLs", c.opts.AllowedQueryURLs)
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, max(c.opts.Parallelism, 1))
	for {
		now := time.Now()
		c.takeDirty(now)
		for key, at := range c.due {
			if c.inflight[key] || at.After(now) {
				continue
			}
			select {
			case slots <- struct{}{}:
			default:
				continue
			}
			c.inflight[key] = true
			running.Add(1)
			go func() {
				defer running.Done()
				defer func() { <-slots }()
				c.done <- result{key: key, next: c.reconcileKey(ctx, key)}
			}()
		}
		if !c.wait(ctx) {
			return nil
		}
	}
}

// takeDirty makes the objectives the informer showed changed due now, for a period, when they
// are new or their spec changed, and forgets the deleted ones.
func (c *Controller) takeDirty(now time.Time) {
	c.mu.Lock()
	dirty := c.dirty
	c.dirty = map[string]bool{}
	c.mu.Unlock()
	for key := range dirty {
		obj, err := c.objects.Get(key)
		if err != nil {
			delete(c.due, key)
			delete(c.generation, key)
			c.forgetPace(key)
			c.metrics.forget(key)
			continue
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if _, known := c.due[key]; !known || c.generation[key] != u.GetGeneration() {
			c.due[key] = now
			c.forgetPace(key)
		}
		c.generation[key] = u.GetGeneration()
	}
}

// forgetPace makes the objective's next reconcile a period.
func (c *Controller) forgetPace(key string) {
	c.mu.Lock()
	delete(c.pace, key)
	c.mu.Unlock()
}

// wait sleeps until an objective changes, a reconcile ends or the next objective is due; false
// when ctx ended.
func (c *Controller) wait(ctx context.Context) bool {
	var timer <-chan time.Time
	var next time.Time
	for key, at := range c.due {
		if !c.inflight[key] && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if !next.IsZero() {
		t := time.NewTimer(max(time.Until(next), time.Millisecond))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.wake:
	case r := <-c.done:
		delete(c.inflight, r.key)
		if _, known := c.due[r.key]; known {
			c.due[r.key] = r.next
		} else {
			// Deleted while it was measured: what that period set goes too.
			c.metrics.forget(r.key)
		}
	case <-timer:
	}
	return true
}
