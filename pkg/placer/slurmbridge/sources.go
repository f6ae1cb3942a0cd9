package slurmbridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// maxAnswer bounds what the bridge reads of one Slurm command's output.
const maxAnswer = 64 << 20

// PodRunner runs Slurm's commands in a virtual cluster's slurmctld pod through pods/exec.
type PodRunner struct {
	Config    *rest.Config
	Kube      kubernetes.Interface
	Pod       *corev1.Pod
	Container string
}

var _ slurm.Runner = (*PodRunner)(nil)

// Run implements slurm.Runner.
func (r *PodRunner) Run(ctx context.Context, args []string) ([]byte, error) {
	var stdout cappedBuffer
	var stderr cappedBuffer
	stdout.max, stderr.max = maxAnswer, 4096
	err := controller.ExecInPod(ctx, r.Config, r.Kube, r.Pod, r.Container, args, nil, &stdout, &stderr)
	if err == nil && stdout.over {
		err = fmt.Errorf("its output is over %d bytes", maxAnswer)
	}
	if err != nil {
		return nil, fmt.Errorf("%s in pod %s/%s: %w: %s", strings.Join(args, " "), r.Pod.Namespace, r.Pod.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// cappedBuffer keeps the first max bytes written to it and notes whether more came.
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.Len()
	if len(p) > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return len(p), nil
}

// ClustersFromPods finds the virtual clusters whose Slurm the bridge can reach: pods labelled
// finegrain.dev/virtual-cluster with finegrain.dev/role slurmctld (ready: the bridge execs into
// its container named slurmctld, else its first) and slurmd (ready: their nodes are the
// cluster's, each by its Kubernetes name in Slurm too). Only pods a VirtualCluster of the label's
// name controls count; a cluster without a ready slurmctld is left out, and so are pods of other
// roles.
func ClustersFromPods(cfg *rest.Config, kube kubernetes.Interface, pods []*corev1.Pod) []*Cluster {
	type key struct{ ns, name string }
	found := map[key]*Cluster{}
	for _, p := range pods {
		switch p.Labels[v1alpha1.LabelRole] {
		case v1alpha1.RoleSlurmctld, v1alpha1.RoleSlurmd:
		default:
			continue
		}
		name := p.Labels[LabelVirtualCluster]
		owner := metav1.GetControllerOf(p)
		if owner == nil || owner.Kind != virtualClusterKind.Kind || owner.Name != name || !podReady(p) {
			continue
		}
		k := key{p.Namespace, name}
		cl := found[k]
		if cl == nil {
			cl = &Cluster{Namespace: p.Namespace, Name: name, UID: owner.UID, Nodes: map[string]string{}}
			found[k] = cl
		}
		if owner.UID != cl.UID {
			continue
		}
		switch p.Labels[v1alpha1.LabelRole] {
		case v1alpha1.RoleSlurmctld:
			container := p.Spec.Containers[0].Name
			if slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == v1alpha1.RoleSlurmctld }) {
				container = v1alpha1.RoleSlurmctld
			}
			cl.Slurm = &slurm.Client{Runner: &PodRunner{Config: cfg, Kube: kube, Pod: p, Container: container}}
		case v1alpha1.RoleSlurmd:
			cl.Nodes[p.Spec.NodeName] = p.Spec.NodeName
		}
	}
	var out []*Cluster
	for _, cl := range found {
		if cl.Slurm != nil {
			out = append(out, cl)
		}
	}
	slices.SortFunc(out, func(a, b *Cluster) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.NodeName == "" || len(p.Spec.Containers) == 0 {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NRTPins reads pins from the node agents' NodeResourceTopology objects.
type NRTPins struct {
	Dyn dynamic.Interface
}

var _ Pins = NRTPins{}

// Pinned implements Pins: the CPUs of the container's entry in the pins of the node's map. It
// lists the one map by name (the placer may list and watch maps, not get them).
func (n NRTPins) Pinned(ctx context.Context, node string, pod *corev1.Pod, container string) (string, bool, error) {
	list, err := n.Dyn.Resource(nrt.GroupVersionResource).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String(), ResourceVersion: "0"})
	if err != nil {
		return "", false, fmt.Errorf("read the NodeResourceTopology of node %s: %w", node, err)
	}
	for i := range list.Items {
		if list.Items[i].GetName() != node {
			continue
		}
		m, err := nrt.ReadFreeCoreMap(&list.Items[i], cpulist.MaxCPUs)
		if err != nil {
			return "", false, err
		}
		for _, z := range m.Zones {
			for e, err := range nrt.ScanPins(z.Pins) {
				if err == nil && e.Namespace == pod.Namespace && e.Pod == pod.Name && e.Container == container {
					return e.CPUs, true, nil
				}
			}
		}
	}
	return "", false, nil
}

// Reasons of the placer's events on a pod it cannot bind (pkg/placer/controller).
var waitReasons = []string{controller.ReasonUnschedulable, controller.ReasonGangTimeout}

// EventWaits reads why the placer has not bound a pod from the Warning events it records on the
// pod, asking the API server at most once every Every for the same pod.
type EventWaits struct {
	Kube  kubernetes.Interface
	Every time.Duration

	mu   sync.Mutex
	last map[types.UID]answer
}

type answer struct {
	at  time.Time
	why string
}

var _ Waits = (*EventWaits)(nil)

// Why implements Waits: the message of the latest such event.
func (w *EventWaits) Why(ctx context.Context, pod *corev1.Pod) (string, error) {
	w.mu.Lock()
	if a, ok := w.last[pod.UID]; ok && time.Since(a.at) < w.Every {
		w.mu.Unlock()
		return a.why, nil
	}
	w.mu.Unlock()
	sel := fields.Set{"involvedObject.name": pod.Name, "type": corev1.EventTypeWarning}.AsSelector().String()
	list, err := w.Kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return "", fmt.Errorf("list the events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var why string
	var at time.Time
	for _, e := range list.Items {
		if e.InvolvedObject.Name != pod.Name || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pod.UID) || !slices.Contains(waitReasons, e.Reason) {
			continue
		}
		if t := eventTime(&e); why == "" || t.After(at) {
			why, at = e.Message, t
		}
	}
	w.mu.Lock()
	if w.last == nil {
		w.last = map[types.UID]answer{}
	}
	now := time.Now()
	for uid, a := range w.last {
		if now.Sub(a.at) >= w.Every {
			delete(w.last, uid)
		}
	}
	w.last[pod.UID] = answer{at: now, why: why}
	w.mu.Unlock()
	return why, nil
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.LastTimestamp.Time
}

// Loop runs the bridge for every virtual cluster of a cluster, as a side loop of the placer
// while it leads: pins from the node agents' NodeResourceTopology objects, the placer's reasons
// from its events (read at most once a second a pod), Slurm through exec into each slurmctld pod.
// The virtual clusters' pods come from an informer of the pods labelled
// finegrain.dev/virtual-cluster: a pass over no virtual cluster makes no API call.
type Loop struct {
	cfg       *rest.Config
	kube      kubernetes.Interface
	bridge    *Bridge
	informers informers.SharedInformerFactory
	synced    cache.InformerSynced
	// pods reads the informer's pods (a pass reads them once).
	pods func() ([]*corev1.Pod, error)
}

// NewLoop makes the loop; an Interval of 0 turns it off.
func NewLoop(cfg *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, opts Options) *Loop {
	inf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelVirtualCluster
	}))
	pods := inf.Core().V1().Pods()
	lister := pods.Lister()
	return &Loop{cfg: cfg, kube: kube, bridge: New(kube, dyn, NRTPins{Dyn: dyn}, &EventWaits{Kube: kube, Every: time.Second}, log, opts),
		informers: inf, synced: pods.Informer().HasSynced,
		pods: func() ([]*corev1.Pod, error) { return lister.List(labels.Everything()) }}
}

// Run runs the bridge until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	if l.bridge.opts.Interval <= 0 {
		return nil
	}
	l.informers.Start(ctx.Done())
	defer l.informers.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), l.synced) {
		return nil
	}
	l.bridge.Run(ctx, func(context.Context) ([]*Cluster, error) {
		pods, err := l.pods()
		if err != nil {
			return nil, fmt.Errorf("list the pods of virtual clusters: %w", err)
		}
		return ClustersFromPods(l.cfg, l.kube, pods), nil
	})
	return nil
}

// HasSynced reports whether the virtual clusters' pods have been listed once (true while the
// bridge is off).
func (l *Loop) HasSynced() bool { return l.bridge.opts.Interval <= 0 || l.synced() }
