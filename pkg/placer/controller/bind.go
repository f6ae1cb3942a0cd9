package controller

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
)

// opKind is what a binding operation does.
type opKind int

const (
	// opJob creates and binds a new HPCJob's pods.
	opJob opKind = iota
	// opGang binds a gang of plain pods.
	opGang
	// opExpand creates and binds the new workers of an elastic job.
	opExpand
	// opLauncher creates a running job's launcher.
	opLauncher
	// opRescale runs the rescale protocol of a job with a rescale hook (rescale).
	opRescale
)

// target is one pod to bind.
type target struct {
	// pod is the pod to create (create set) or the existing pod to bind.
	pod    *corev1.Pod
	create bool
	// node is where to bind it; empty for a worker created to wait (minAvailable let the gang
	// start without it).
	node string
	// numa is the NUMA node for a pinned pod, -1 for a shared one.
	numa int
	role string

	// uid is the pod's UID once it is created or known.
	uid types.UID
	err error
}

// bindOp is one gang's binding, run in the background and finished by the loop.
type bindOp struct {
	key   string
	kind  opKind
	entry queue.Entry
	// job and jobObj are set for HPCJob operations.
	job    *v1alpha1.HPCJob
	jobObj *unstructured.Unstructured
	// status is the job status to write once every pod is bound.
	status *v1alpha1.HPCJobStatus
	note   string

	// sshSecret asks for the job's SSH Secret before anything else (made once per job).
	sshSecret bool
	configMap *corev1.ConfigMap
	service   *corev1.Service
	targets   []*target

	// growth goes on with the rescale protocol once an elastic job's new workers are bound;
	// rescale is an opRescale's protocol run.
	growth, rescale *rescale

	setupErr error
	started  time.Time
}

func (op *bindOp) failed() error {
	if op.setupErr != nil {
		return op.setupErr
	}
	var errs []error
	for _, t := range op.targets {
		if t.err != nil {
			errs = append(errs, t.err)
		}
	}
	return errors.Join(errs...)
}

// start hands op to a background goroutine; its result comes back to the loop.
func (c *Controller) start(ctx context.Context, op *bindOp) {
	c.inflight[op.key] = op
	c.binds.Add(1)
	go func() {
		defer c.binds.Done()
		c.execute(ctx, op)
		select {
		case c.results <- op:
		case <-ctx.Done():
		}
	}()
}

// slot takes one of the API call slots, and reports false once ctx has ended (even when a slot
// was free too: select chooses at random among ready cases, and a stopping placer makes no
// call more).
func (c *Controller) slot(ctx context.Context) bool {
	select {
	case c.apiSlots <- struct{}{}:
		if ctx.Err() != nil {
			c.release()
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *Controller) release() { <-c.apiSlots }

// execute makes the API calls of one operation: the SSH Secret, the hostfile ConfigMap and the
// Service first, then every pod in parallel (create or annotate, then bind).
func (c *Controller) execute(ctx context.Context, op *bindOp) {
	if op.kind == opRescale {
		c.runRescale(ctx, op.rescale)
		return
	}
	if op.sshSecret {
		if err := c.ensureSSHSecret(ctx, op.job); err != nil {
			op.setupErr = err
			return
		}
	}
	if op.configMap != nil {
		if err := c.applyConfigMap(ctx, op.job, op.configMap); err != nil {
			op.setupErr = err
			return
		}
	}
	if op.service != nil {
		if err := c.ensureService(ctx, op.job, op.service); err != nil {
			op.setupErr = err
			return
		}
	}
	// Workers first; the launcher (which runs mpirun) only once every worker is bound.
	c.bindAll(ctx, op.targets, func(t *target) bool { return t.role != v1alpha1.RoleLauncher })
	if op.failed() == nil {
		c.bindAll(ctx, op.targets, func(t *target) bool { return t.role == v1alpha1.RoleLauncher })
	}
}

func (c *Controller) bindAll(ctx context.Context, targets []*target, which func(*target) bool) {
	var wg sync.WaitGroup
	for _, t := range targets {
		if !which(t) {
			continue
		}
		if !c.slot(ctx) {
			t.err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.release()
			t.err = c.bindOne(ctx, t)
		}()
	}
	wg.Wait()
}

// bindOne creates or annotates one pod and binds it. The placer writes the NUMA node
// annotation on every pod it binds (and removes it from a shared one), so the node agent can
// trust it. A pod the placer makes is created bound (its node in the spec, its NUMA node among
// its annotations): one API write instead of a create and a binding. For a pod that exists, the
// binding carries the annotation: the API server merges a binding's annotations into the pod as
// it sets the node, so the pod is annotated and bound in one call and never seen bound without
// its NUMA node.
func (c *Controller) bindOne(ctx context.Context, t *target) error {
	pods := c.kube.CoreV1().Pods(t.pod.Namespace)
	p := t.pod
	if !t.create && p.Spec.SchedulerName != c.opts.SchedulerName {
		// RBAC lets the placer patch and bind any pod; it touches only those that name it.
		return fmt.Errorf("pod %s/%s names scheduler %q, not %q: the placer binds only its own pods", p.Namespace, p.Name, p.Spec.SchedulerName, c.opts.SchedulerName)
	}
	var annotations map[string]string
	if t.create {
		if t.node != "" {
			p = p.DeepCopy()
			p.Spec.NodeName = t.node
		}
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			if cur, gerr := c.pods.Pods(p.Namespace).Get(p.Name); gerr == nil && !sameController(cur, p) {
				return notOwnedPod(cur, p)
			}
		}
		if err != nil {
			return fmt.Errorf("create pod %s/%s bound to node %q: %w", p.Namespace, p.Name, t.node, err)
		}
		t.uid = created.UID
		return nil
	} else if cur, has := p.Annotations[v1alpha1.AnnotationNUMANode]; t.numa >= 0 && cur != strconv.Itoa(t.numa) {
		annotations = map[string]string{v1alpha1.AnnotationNUMANode: strconv.Itoa(t.numa)}
	} else if t.numa < 0 && has {
		patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationNUMANode + `":null}}}`)
		if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("remove the NUMA node annotation of shared pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: t.node},
	}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", p.Namespace, p.Name, t.node, err)
	}
	t.uid = p.UID
	return nil
}

// NotOwnedError says that an object a job needs, of the name the job gives it, exists and is not
// controlled by the job: the placer neither adopts, overwrites nor deletes it.
type NotOwnedError struct {
	Kind, Namespace, Name string
	// Job is the HPCJob ("namespace/name").
	Job string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not owned by HPCJob %s: rename the job, or delete the %s if it is a leftover",
		e.Kind, e.Namespace, e.Name, e.Job, e.Kind)
}

// sameController reports whether two pods have the same controller (by UID).
func sameController(a, b *corev1.Pod) bool {
	ra, rb := metav1.GetControllerOfNoCopy(a), metav1.GetControllerOfNoCopy(b)
	return ra != nil && rb != nil && ra.UID == rb.UID
}

// notOwnedPod says that pod cur holds the name of the job's pod want.
func notOwnedPod(cur, want *corev1.Pod) error {
	job := cur.Namespace + "/"
	if ref := metav1.GetControllerOfNoCopy(want); ref != nil {
		job += ref.Name
	}
	return &NotOwnedError{Kind: "Pod", Namespace: cur.Namespace, Name: cur.Name, Job: job}
}

// notOwned says that obj, needed by the job owner, belongs to something else.
func notOwned(kind string, obj metav1.Object, owner metav1.Object) error {
	return &NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Job: owner.GetNamespace() + "/" + owner.GetName()}
}

// controlledBy reports whether the object with uid controls obj.
func controlledBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// ensureSSHSecret makes the job's SSH key pair once: an existing Secret of the job is kept (a job
// placed again keeps its identity), one of anything else is an error. The key is never logged.
func (c *Controller) ensureSSHSecret(ctx context.Context, job *v1alpha1.HPCJob) error {
	secrets := c.kube.CoreV1().Secrets(job.Namespace)
	name := v1alpha1.SSHSecretName(job.Name)
	for range 2 {
		cur, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if !controlledBy(cur, job.UID) {
				return notOwned("Secret", cur, job)
			}
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read SSH Secret %s/%s: %w", job.Namespace, name, err)
		}
		id, err := mpi.NewIdentity(rand.Reader, "finegrain HPCJob "+job.Namespace+"/"+job.Name)
		if err != nil {
			return fmt.Errorf("SSH identity of HPCJob %s/%s: %w", job.Namespace, job.Name, err)
		}
		_, err = secrets.Create(ctx, hpcjob.SSHSecret(job, id), metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create SSH Secret %s/%s: %w", job.Namespace, name, err)
		}
	}
	return fmt.Errorf("create SSH Secret %s/%s: it keeps appearing and disappearing", job.Namespace, name)
}

// applyConfigMap writes the job's ConfigMap: created, or its data replaced when the job owns it.
// The patch carries the UID and resourceVersion of the ConfigMap it read: should the object be
// replaced in between (deleted and made again by someone else), the API server refuses it instead
// of changing an object the job does not own.
func (c *Controller) applyConfigMap(ctx context.Context, job *v1alpha1.HPCJob, cm *corev1.ConfigMap) error {
	cms := c.kube.CoreV1().ConfigMaps(cm.Namespace)
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.ConfigMap
		if cur, err = cms.Get(ctx, cm.Name, metav1.GetOptions{}); err == nil {
			if !controlledBy(cur, job.UID) {
				return notOwned("ConfigMap", cur, job)
			}
			patch, _ := json.Marshal(map[string]any{
				"metadata": map[string]any{"uid": cur.UID, "resourceVersion": cur.ResourceVersion},
				"data":     cm.Data,
			})
			_, err = cms.Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("write hostfile ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// ensureService creates the job's headless Service, or keeps the one the job owns.
func (c *Controller) ensureService(ctx context.Context, job *v1alpha1.HPCJob, svc *corev1.Service) error {
	svcs := c.kube.CoreV1().Services(svc.Namespace)
	_, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.Service
		if cur, err = svcs.Get(ctx, svc.Name, metav1.GetOptions{}); err == nil && !controlledBy(cur, job.UID) {
			return notOwned("Service", cur, job)
		}
	}
	if err != nil {
		return fmt.Errorf("create Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// deletePods removes pods of a job in the background: workers of a finished or shrinking job
// (with their grace period, grace nil) or pods of an attempt being rolled back (grace 0: they
// never ran their workload, and their names must be free for the next attempt). It is the one
// place the placer deletes pods, and it deletes only what the job made: a pod the job object (by
// UID) does not control, or whose UID is unknown, is refused and logged — RBAC lets the placer
// delete pods in every namespace, so this check is what keeps it to its own. Each deletion
// carries the pod's UID as a precondition: a pod made again under its name since (a retried
// launcher) is not the one meant, and the API server refuses with a conflict.
func (c *Controller) deletePods(ctx context.Context, job *v1alpha1.HPCJob, pods []*corev1.Pod, grace *int64) {
	for _, p := range pods {
		uid := p.UID
		if uid == "" || !controlledBy(p, job.UID) {
			c.log.Error("refusing to delete a pod the job does not own", "pod", podKey(p), "uid", uid, "job", job.Namespace+"/"+job.Name)
			continue
		}
		opts := metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &uid}}
		c.binds.Add(1)
		go func() {
			defer c.binds.Done()
			if !c.slot(ctx) {
				return
			}
			defer c.release()
			err := c.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.log.Warn("delete pod failed", "pod", podKey(p), "err", err)
			}
		}()
	}
}
