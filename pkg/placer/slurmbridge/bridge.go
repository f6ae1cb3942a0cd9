// Package slurmbridge is the delegation bridge between the Slurm of each virtual cluster and the
// placer (Genisys steps 1–5, docs/slurm.md): every job Slurm holds (job_submit.lua)
// becomes a PodGroup of placeholder pods that the placer binds all-or-nothing and the node agent
// pins; once they are bound and pinned the bridge gives Slurm their nodes and releases the job;
// when the job ends, its placeholders go. It runs in the placer process while it leads, reaches
// Slurm through its commands (pkg/slurm) and reconciles both ways on every pass, so that a
// restart of the bridge, of slurmctld or of the placer leaves no job running without its
// placeholders and no placeholder without its job. It never binds a pod or picks a CPU itself.
package slurmbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// Slurm is what the bridge asks of a virtual cluster's slurmctld (*slurm.Client).
type Slurm interface {
	Jobs(ctx context.Context) ([]slurm.Job, error)
	Start(ctx context.Context, id slurm.JobID, nodes []string) error
	SetComment(ctx context.Context, id slurm.JobID, text string) error
	Hold(ctx context.Context, id slurm.JobID) error
	RequeueHold(ctx context.Context, id slurm.JobID) error
}

var _ Slurm = (*slurm.Client)(nil)

// Cluster is one virtual cluster as the bridge drives it.
type Cluster struct {
	Namespace, Name string
	// UID is the VirtualCluster object's: its placeholders are owned by it ("" for none).
	UID   types.UID
	Slurm Slurm
	// Nodes maps each Kubernetes node where the cluster's slurmd runs to its Slurm node name.
	Nodes map[string]string
}

// Pins tells whether the node agent has pinned a pod's container and to which CPUs.
type Pins interface {
	Pinned(ctx context.Context, node string, pod *corev1.Pod, container string) (cpus string, ok bool, err error)
}

// Waits tells why the placer has not bound a pod yet ("" when it has said nothing).
type Waits interface {
	Why(ctx context.Context, pod *corev1.Pod) (string, error)
}

// Options configure the bridge.
type Options struct {
	// Interval is how often each virtual cluster's jobs are read (squeue) while it has a job of
	// finegrain's that has not ended, or placeholders: the delay before an ended job's CPUs come
	// back, and before a job's start once its placeholders are pinned.
	Interval time.Duration
	// IdleInterval is how often the jobs of a virtual cluster without any are read: the delay
	// before a first job gets its placeholders.
	IdleInterval time.Duration
	// Image is what the placeholder pods run: anything that sleeps and stops on SIGTERM.
	Image string
	// SchedulerName is the placer's.
	SchedulerName string
	// ExclusiveNodes keeps Slurm jobs apart (no other HPC job's pods on a job's nodes) unless a
	// job says otherwise (finegrain.exclusive=false in its comment).
	ExclusiveNodes bool
	// Placement is the tie-break of a job's placeholders unless the job names its own
	// (finegrain.placement=... in its comment).
	Placement v1alpha1.PlacementPolicy
	// DefaultMemoryPerCPU sizes the placeholders of a job that asks for no memory (set the
	// virtual cluster's DefMemPerCPU to the same).
	DefaultMemoryPerCPU int64
	// HostPort is the host port each placeholder of a job of several nodes asks for, so that
	// the placer never puts two of them on one node.
	HostPort int32
}

// DefaultOptions are the bridge's defaults.
func DefaultOptions() Options {
	return Options{
		Interval: 250 * time.Millisecond, IdleInterval: 2 * time.Second, Image: "localhost/finegrain-pause:dev", SchedulerName: v1alpha1.DefaultSchedulerName,
		ExclusiveNodes: true, Placement: v1alpha1.LeastLoaded, DefaultMemoryPerCPU: v1alpha1.DefaultTaskMemoryBytes, HostPort: 29999,
	}
}

// CommentPrefix starts every comment the bridge writes on a waiting job.
const CommentPrefix = "finegrain: "

// Bridge drives the Slurm of virtual clusters.
type Bridge struct {
	opts  Options
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	pins  Pins
	waits Waits
	log   *slog.Logger
	// quiet holds, by "namespace/name", when a virtual cluster was last found without a job of
	// finegrain's or a placeholder.
	quiet map[string]time.Time
}

// New returns a bridge.
func New(kube kubernetes.Interface, dyn dynamic.Interface, pins Pins, waits Waits, log *slog.Logger, opts Options) *Bridge {
	return &Bridge{opts: opts, kube: kube, dyn: dyn, pins: pins, waits: waits, log: log, quiet: map[string]time.Time{}}
}

// Action is what one pass did to one job.
type Action string

// Actions of a pass.
const (
	// Placed: the job's PodGroup and placeholder pods were created.
	Placed Action = "placed"
	// Started: the job got its placeholders' nodes and was released.
	Started Action = "started"
	// Released: the job's placeholders were deleted (it ended, is gone, or they were broken).
	Released Action = "released"
	// Requeued: a job running without its placeholders was requeued held.
	Requeued Action = "requeued"
	// Held: a pending job Slurm could start on its own was held.
	Held Action = "held"
	// Commented: the job's comment now says why it waits.
	Commented Action = "commented"
)

// Sync is one pass over a virtual cluster: it reads its jobs and its placeholders and makes them
// agree (the rules of docs/slurm.md). It returns what it did by job (a job whose
// action failed is in the error instead); an error of one job does not stop the others. It is
// not safe for concurrent use.
func (b *Bridge) Sync(ctx context.Context, cl *Cluster) (map[slurm.JobID][]Action, error) {
	jobs, err := cl.Slurm.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("virtual cluster %s/%s: read its jobs: %w", cl.Namespace, cl.Name, err)
	}
	byJob, err := b.placeholders(ctx, cl)
	if err != nil {
		return nil, err
	}
	key := cl.Namespace + "/" + cl.Name
	if len(byJob) == 0 && !slices.ContainsFunc(jobs, func(j slurm.Job) bool { return j.Delegated() && !j.Ended() }) {
		b.quiet[key] = time.Now()
	} else {
		delete(b.quiet, key)
	}
	done := map[slurm.JobID][]Action{}
	var errs []error
	for _, j := range jobs {
		pods := byJob[j.ID]
		delete(byJob, j.ID)
		acts, err := b.syncJob(ctx, cl, j, pods)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("virtual cluster %s/%s, Slurm job %s: %w", cl.Namespace, cl.Name, j.ID, err))
		case len(acts) > 0:
			done[j.ID] = acts
		}
	}
	// Placeholders of jobs slurmctld no longer knows.
	for _, id := range slices.Sorted(maps.Keys(byJob)) {
		if err := b.release(ctx, cl, id, byJob[id]); err != nil {
			errs = append(errs, err)
			continue
		}
		done[id] = append(done[id], Released)
	}
	return done, errors.Join(errs...)
}

// syncJob applies the rules to one job and its placeholder pods.
func (b *Bridge) syncJob(ctx context.Context, cl *Cluster, j slurm.Job, pods []*corev1.Pod) ([]Action, error) {
	a := allocationOf(cl.Name, j, b.opts.DefaultMemoryPerCPU)
	switch {
	case !j.Delegated():
		// Not seen by finegrain's job_submit.lua: Slurm's own job, never the bridge's.
		return nil, nil
	case j.Ended():
		if len(pods) == 0 {
			return nil, nil
		}
		return []Action{Released}, b.release(ctx, cl, j.ID, pods)
	case j.State == slurm.StateCompleting:
		// Ending: Slurm kills its processes on its nodes, whose placeholders keep holding the
		// CPUs until it has ended. Its node count shrinks meanwhile as nodes finish, so it is
		// not compared with the placeholders.
		return nil, nil
	case j.Active():
		if len(live(pods)) == a.Pods && j.RequiredNodes != "" {
			return nil, nil
		}
		// Running without (all) its placeholders, or started without the node list the bridge
		// gives (released by hand before its placeholders were bound): its CPUs are not held
		// for it where it runs. Stop it and let it be placed again.
		b.log.Info("Slurm job runs without its placeholders: requeued held", "cluster", cl.Namespace+"/"+cl.Name, "job", j.ID, "placeholders", len(live(pods)), "want", a.Pods)
		if err := cl.Slurm.RequeueHold(ctx, j.ID); err != nil {
			return nil, err
		}
		return []Action{Requeued}, b.release(ctx, cl, j.ID, pods)
	case j.State == slurm.StatePending && !j.Held():
		if len(live(pods)) == a.Pods && j.RequiredNodes != "" {
			// Released by the bridge onto its placeholders' nodes, about to start.
			return nil, nil
		}
		return []Action{Held}, cl.Slurm.Hold(ctx, j.ID)
	case j.Held():
		return b.syncHeld(ctx, cl, j, a, pods)
	}
	return nil, nil
}

// syncHeld makes a held job's placeholders, starts the job once they are bound and pinned, and
// says in its comment why it waits otherwise.
func (b *Bridge) syncHeld(ctx context.Context, cl *Cluster, j slurm.Job, a Allocation, pods []*corev1.Pod) ([]Action, error) {
	if len(pods) == 0 {
		o, err := j.Options()
		if err != nil {
			if text := CommentPrefix + err.Error(); j.Comment != text {
				return []Action{Commented}, cl.Slurm.SetComment(ctx, j.ID, text)
			}
			return nil, nil
		}
		return []Action{Placed}, b.place(ctx, cl, j, a, o)
	}
	if len(live(pods)) != a.Pods || len(pods) != a.Pods {
		// Some placeholder was deleted or failed: start over.
		return []Action{Released}, b.release(ctx, cl, j.ID, pods)
	}
	nodes, why, err := b.ready(ctx, cl, pods)
	if err != nil {
		return nil, err
	}
	if why == "" {
		if err := cl.Slurm.Start(ctx, j.ID, nodes); err != nil {
			return nil, err
		}
		b.log.Info("Slurm job started on its placeholders' nodes", "cluster", cl.Namespace+"/"+cl.Name, "job", j.ID, "nodes", strings.Join(nodes, ","))
		if strings.HasPrefix(j.Comment, CommentPrefix) {
			// Why it waited is over: squeue would show it beside the running job.
			return []Action{Started}, cl.Slurm.SetComment(ctx, j.ID, "")
		}
		return []Action{Started}, nil
	}
	text := CommentPrefix + why
	if j.Comment == text {
		return nil, nil
	}
	return []Action{Commented}, cl.Slurm.SetComment(ctx, j.ID, text)
}

// ready returns the Slurm names of the placeholders' nodes once every placeholder is bound,
// running and pinned; else why the job still waits.
func (b *Bridge) ready(ctx context.Context, cl *Cluster, pods []*corev1.Pod) (nodes []string, why string, err error) {
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			msg, err := b.waits.Why(ctx, p)
			if err != nil || msg == "" {
				return nil, fmt.Sprintf("waiting for the placer to bind %d placeholder pods (%d CPUs each)", len(pods), cpusOf(p)), err
			}
			return nil, "waiting for placement: " + msg, nil
		}
		name, ok := cl.Nodes[p.Spec.NodeName]
		if !ok {
			return nil, fmt.Sprintf("placeholder %s is on node %s, where this cluster has no slurmd running", p.Name, p.Spec.NodeName), nil
		}
		if seen[name] {
			return nil, fmt.Sprintf("two placeholders are on node %s", p.Spec.NodeName), nil
		}
		seen[name] = true
		if p.Status.Phase != corev1.PodRunning {
			return nil, fmt.Sprintf("waiting for placeholder %s to run on node %s", p.Name, p.Spec.NodeName), nil
		}
		if _, ok, err := b.pins.Pinned(ctx, p.Spec.NodeName, p, ContainerName); err != nil || !ok {
			return nil, fmt.Sprintf("waiting for the node agent to pin placeholder %s on node %s", p.Name, p.Spec.NodeName), err
		}
		nodes = append(nodes, name)
	}
	slices.Sort(nodes)
	return nodes, "", nil
}

// place creates a held job's PodGroup, then its pods, with the job's placement options (the
// bridge's where the job gives none).
func (b *Bridge) place(ctx context.Context, cl *Cluster, j slurm.Job, a Allocation, o slurm.Options) error {
	if len(cl.Nodes) == 0 {
		return fmt.Errorf("the virtual cluster has no slurmd running: job %s waits", j.ID)
	}
	spec := &placeholderSpec{namespace: cl.Namespace, cluster: cl.Name, owner: cl.UID, job: j.ID, image: b.opts.Image,
		schedulerName: b.opts.SchedulerName, nodes: slices.Collect(maps.Keys(cl.Nodes)), exclusive: b.opts.ExclusiveNodes,
		placement: b.opts.Placement}
	if o.Placement != "" {
		spec.placement = v1alpha1.PlacementPolicy(o.Placement)
	}
	if o.Exclusive != nil {
		spec.exclusive = *o.Exclusive
	}
	if a.Pods > 1 {
		spec.hostPort = b.opts.HostPort
	}
	pg, err := spec.podGroup(a)
	if err != nil {
		return err
	}
	pgs := b.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace(cl.Namespace)
	if _, err = pgs.Create(ctx, pg, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		err = b.checkOwned(ctx, cl, "PodGroup", a.Group, func() (metav1.Object, error) { return pgs.Get(ctx, a.Group, metav1.GetOptions{}) })
	}
	if err != nil {
		return fmt.Errorf("create PodGroup %s/%s: %w", cl.Namespace, a.Group, err)
	}
	for _, p := range spec.pods(a) {
		_, err := b.kube.CoreV1().Pods(cl.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = b.checkOwned(ctx, cl, "pod", p.Name, func() (metav1.Object, error) {
				return b.kube.CoreV1().Pods(cl.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			})
		}
		if err != nil {
			return fmt.Errorf("create placeholder pod %s/%s: %w", cl.Namespace, p.Name, err)
		}
	}
	b.log.Info("Slurm job's placeholders created", "cluster", cl.Namespace+"/"+cl.Name, "job", j.ID, "pods", a.Pods, "cpus", a.CPUs, "memory", a.Memory)
	return nil
}

// release deletes a job's placeholder pods (at once: their CPUs return as soon as the kubelet
// stops them) and its PodGroup.
func (b *Bridge) release(ctx context.Context, cl *Cluster, id slurm.JobID, pods []*corev1.Pod) error {
	var errs []error
	now := int64(0)
	for _, p := range pods {
		uid := p.UID
		err := b.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &now, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete placeholder pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	group := groupName(cl.Name, id)
	pgs := b.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace(cl.Namespace)
	pg, err := pgs.Get(ctx, group, metav1.GetOptions{})
	if err == nil && ownedBy(cl, pg) {
		uid := pg.GetUID()
		err = pgs.Delete(ctx, group, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		errs = append(errs, fmt.Errorf("delete PodGroup %s/%s: %w", cl.Namespace, group, err))
	}
	return errors.Join(errs...)
}

// checkOwned says whether an object that already exists under a placeholder's name is the
// bridge's (made by an earlier pass): nil if the cluster's VirtualCluster owns it, else an error
// naming it, so that a look-alike is never taken for the bridge's own.
func (b *Bridge) checkOwned(ctx context.Context, cl *Cluster, kind, name string, get func() (metav1.Object, error)) error {
	o, err := get()
	if err != nil {
		return err
	}
	if !ownedBy(cl, o) {
		return fmt.Errorf("%s %s/%s exists and is not virtual cluster %s's: the bridge leaves it alone and the job waits; delete or rename it", kind, cl.Namespace, name, cl.Name)
	}
	return nil
}

// ownedBy reports whether the cluster's VirtualCluster owns an object (any object, when the
// cluster has no UID).
func ownedBy(cl *Cluster, o metav1.Object) bool {
	return cl.UID == "" || slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
		return r.UID == cl.UID && r.Kind == virtualClusterKind.Kind
	})
}

// placeholders lists the virtual cluster's placeholder pods by job, those being deleted left
// out. A pod whose job label does not parse is not the bridge's and is ignored.
func (b *Bridge) placeholders(ctx context.Context, cl *Cluster) (map[slurm.JobID][]*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelWorkload: WorkloadSlurmJob, LabelVirtualCluster: cl.Name}).String()
	list, err := b.kube.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("virtual cluster %s/%s: list its placeholder pods: %w", cl.Namespace, cl.Name, err)
	}
	byJob := map[slurm.JobID][]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		id, err := slurm.ParseJobID(p.Labels[LabelSlurmJob])
		if err != nil || p.DeletionTimestamp != nil || !b.owns(cl, p) {
			continue
		}
		byJob[id] = append(byJob[id], p)
	}
	return byJob, nil
}

// owns reports whether a pod is one the bridge made for the cluster: its scheduler is the
// placer's and it is owned by the cluster's VirtualCluster (when the cluster has a UID).
func (b *Bridge) owns(cl *Cluster, p *corev1.Pod) bool {
	return p.Spec.SchedulerName == b.opts.SchedulerName && ownedBy(cl, p)
}

// live returns the pods that have not terminated.
func live(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func cpusOf(p *corev1.Pod) int64 {
	for _, c := range p.Spec.Containers {
		if c.Name == ContainerName {
			return c.Resources.Requests.Cpu().Value()
		}
	}
	return 0
}

// Run syncs every virtual cluster clusters finds, every Interval (every IdleInterval one without
// a job of finegrain's or a placeholder), until ctx ends. Each error is logged when it first
// appears for a cluster, not on every pass.
func (b *Bridge) Run(ctx context.Context, clusters func(context.Context) ([]*Cluster, error)) {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	lastErr := map[string]string{}
	report := func(key string, err error) {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != lastErr[key] && msg != "" {
			b.log.Warn("Slurm delegation bridge", "cluster", key, "err", msg)
		}
		lastErr[key] = msg
	}
	for {
		cls, err := clusters(ctx)
		report("", err)
		for _, cl := range cls {
			key := cl.Namespace + "/" + cl.Name
			if at, ok := b.quiet[key]; ok && time.Since(at) < b.opts.IdleInterval {
				continue
			}
			acts, err := b.Sync(ctx, cl)
			report(cl.Namespace+"/"+cl.Name, err)
			for id, a := range acts {
				b.log.Debug("Slurm job synced", "cluster", cl.Namespace+"/"+cl.Name, "job", id, "actions", a)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
