package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// The workloads an objective's targetRef names and the ReplicaSets between a Deployment and its
// pods, read as metadata only (uid and ownerReferences).
var (
	gvrReplicaSets  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	gvrDeployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrStatefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

// objectiveProbeInterval is how often the agent asks again whether the API server serves
// ServiceObjectives, while it does not (the CRD is not installed).
const objectiveProbeInterval = 10 * time.Second

// ObjectiveSource tells the agent the I/O bandwidth the ServiceObjectives give the pods of its
// node. Objectives is the real one.
type ObjectiveSource interface {
	// Run watches the objectives until ctx is done.
	Run(ctx context.Context)
	// Changed receives a value after the objectives changed.
	Changed() <-chan struct{}
	// Generation counts the changes; ok is false until the objectives have been listed once
	// (until then the agent neither sets nor clears a limit).
	Generation() (gen uint64, ok bool)
	// PodIOBandwidth returns the bytes per second (read and write each) of the objective whose
	// target owns pod, and that objective's namespace/name; 0 and "" when no objective holds
	// the pod or its objective has decided no I/O size yet.
	PodIOBandwidth(ctx context.Context, pod *corev1.Pod) (uint64, string, error)
}

// ioObjective is what the agent reads of one ServiceObjective: its target and the I/O size the
// placer's loop wrote into its status (status.podSize.ioBandwidth).
type ioObjective struct {
	key       string
	namespace string
	target    v1alpha1.ObjectiveTargetRef
	bps       uint64
}

// Objectives watches the ServiceObjectives of every namespace through the dynamic client and
// finds which one holds a pod by following the pod's controller reference, uid checked against
// the live objects (pod → ReplicaSet → Deployment, or pod → StatefulSet), never by labels or
// annotations a pod author writes.
type Objectives struct {
	dyn     dynamic.Interface
	meta    metadata.Interface
	log     *slog.Logger
	changed chan struct{}
	gen     atomic.Uint64
	synced  atomic.Bool

	mu   sync.Mutex
	objs map[string]ioObjective
}

var _ ObjectiveSource = (*Objectives)(nil)

// NewObjectives returns a watcher that starts with Run.
func NewObjectives(dyn dynamic.Interface, meta metadata.Interface, log *slog.Logger) *Objectives {
	return &Objectives{dyn: dyn, meta: meta, log: log, changed: make(chan struct{}, 1), objs: map[string]ioObjective{}}
}

// Changed implements ObjectiveSource.
func (o *Objectives) Changed() <-chan struct{} { return o.changed }

// Generation implements ObjectiveSource.
func (o *Objectives) Generation() (uint64, bool) { return o.gen.Load(), o.synced.Load() }

// Run waits until the API server serves ServiceObjectives (asking every 10 s and saying once why
// not), then runs an informer on them until ctx is done.
func (o *Objectives) Run(ctx context.Context) {
	res := o.dyn.Resource(v1alpha1.ServiceObjectiveGroupVersionResource)
	said := ""
	for {
		_, err := res.List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if msg := err.Error(); msg != said {
			said = msg
			why := "cannot list ServiceObjectives; no I/O limits are set or cleared until it can"
			if apierrors.IsNotFound(err) {
				why = "the API server does not serve ServiceObjectives (their CRD, daemonset/placer/crd-serviceobjective.yaml, is not installed); no I/O limits until it does"
			}
			o.log.Warn(why, "reason", msg)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(objectiveProbeInterval):
		}
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(o.dyn, 0)
	inf := f.ForResource(v1alpha1.ServiceObjectiveGroupVersionResource).Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.put(obj) },
		UpdateFunc: func(_, obj any) { o.put(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				o.drop(d.Key)
				return
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				o.drop(u.GetNamespace() + "/" + u.GetName())
			}
		},
	})
	if err != nil {
		o.log.Error("cannot watch ServiceObjectives; no I/O limits", "reason", err.Error())
		return
	}
	f.Start(ctx.Done())
	// Shutdown waits for the informer's goroutines once ctx is done.
	defer f.Shutdown()
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		o.synced.Store(true)
		o.bump()
		o.log.Info("watching ServiceObjectives for the pods' I/O bandwidth")
	}
	<-ctx.Done()
}

// put records an objective's target and I/O size.
func (o *Objectives) put(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var so v1alpha1.ServiceObjective
	key := u.GetNamespace() + "/" + u.GetName()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &so); err != nil {
		o.log.Warn("cannot read a ServiceObjective; it sets no I/O limit", "objective", key, "reason", err.Error())
		o.drop(key)
		return
	}
	io := ioObjective{key: key, namespace: so.Namespace, target: so.Spec.TargetRef}
	if sz := so.Status.PodSize; sz != nil && sz.IOBandwidth.Sign() > 0 {
		io.bps = uint64(min(sz.IOBandwidth.Value(), cgroup.MaxIOBPS))
	}
	o.mu.Lock()
	old, had := o.objs[key]
	o.objs[key] = io
	o.mu.Unlock()
	if !had || old != io {
		o.bump()
	}
}

func (o *Objectives) drop(key string) {
	o.mu.Lock()
	_, had := o.objs[key]
	delete(o.objs, key)
	o.mu.Unlock()
	if had {
		o.bump()
	}
}

func (o *Objectives) bump() {
	o.gen.Add(1)
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// PodIOBandwidth implements ObjectiveSource. Where several objectives hold one pod (two
// objectives naming one workload) the smallest I/O size wins, deterministically.
func (o *Objectives) PodIOBandwidth(ctx context.Context, pod *corev1.Pod) (uint64, string, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return 0, "", nil
	}
	o.mu.Lock()
	var cands []ioObjective
	for _, obj := range o.objs {
		if obj.namespace == pod.Namespace && matchesOwner(obj.target, ref) {
			cands = append(cands, obj)
		}
	}
	o.mu.Unlock()
	if len(cands) == 0 {
		return 0, "", nil
	}
	owner, err := o.workloadOf(ctx, pod.Namespace, ref)
	if err != nil || owner == nil {
		return 0, "", err
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].key < cands[j].key })
	var best *ioObjective
	for i := range cands {
		c := &cands[i]
		if c.target.Kind != owner.kind || c.target.Name != owner.name {
			continue
		}
		if best == nil || (c.bps != 0 && (best.bps == 0 || c.bps < best.bps)) {
			best = c
		}
	}
	if best == nil {
		return 0, "", nil
	}
	return best.bps, best.key, nil
}

// matchesOwner says whether a pod whose controller is ref can belong to target, before any
// lookup: a Deployment's pods are owned by its ReplicaSets, a StatefulSet's by itself.
func matchesOwner(target v1alpha1.ObjectiveTargetRef, ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != "apps" {
		return false
	}
	switch target.Kind {
	case v1alpha1.TargetDeployment:
		return ref.Kind == "ReplicaSet"
	case v1alpha1.TargetStatefulSet:
		return ref.Kind == "StatefulSet" && ref.Name == target.Name
	}
	return false
}

// workload is the Deployment or StatefulSet a pod belongs to.
type workload struct {
	kind v1alpha1.TargetKind
	name string
}

// workloadOf follows a pod's controller reference to its Deployment or StatefulSet, checking
// every uid against the live object: a reference a pod author forged to an object that is not
// there, or to another object of that name, leads nowhere (nil).
func (o *Objectives) workloadOf(ctx context.Context, ns string, ref *metav1.OwnerReference) (*workload, error) {
	switch ref.Kind {
	case "StatefulSet":
		ok, err := o.live(ctx, gvrStatefulSets, ns, ref.Name, ref.UID)
		if !ok || err != nil {
			return nil, err
		}
		return &workload{kind: v1alpha1.TargetStatefulSet, name: ref.Name}, nil
	case "ReplicaSet":
		rs, err := o.meta.Resource(gvrReplicaSets).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ReplicaSet %s/%s: %w", ns, ref.Name, err)
		}
		if rs.UID != ref.UID {
			return nil, nil
		}
		dref := metav1.GetControllerOf(rs)
		if dref == nil || dref.Kind != "Deployment" {
			return nil, nil
		}
		ok, err := o.live(ctx, gvrDeployments, ns, dref.Name, dref.UID)
		if !ok || err != nil {
			return nil, err
		}
		return &workload{kind: v1alpha1.TargetDeployment, name: dref.Name}, nil
	}
	return nil, nil
}

// live reports whether the object exists with the given uid.
func (o *Objectives) live(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, uid types.UID) (bool, error) {
	m, err := o.meta.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s/%s: %w", gvr.Resource, ns, name, err)
	}
	return m.UID == uid, nil
}
