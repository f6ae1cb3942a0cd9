package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
	"github.com/finegrain-dev/finegrain/pkg/placer/queue"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// workerIndex reads the index from a worker pod's name (job-worker-<i>).
func workerIndex(job string, p *corev1.Pod) int {
	i, err := strconv.Atoi(strings.TrimPrefix(p.Name, job+"-worker-"))
	if err != nil {
		return -1
	}
	return i
}

func annotationInt(p *corev1.Pod, name string) int {
	v, _ := strconv.Atoi(p.Annotations[name])
	return v
}

// liveWorkers returns a job's worker pods that are not being deleted, by index.
func (c *Controller) liveWorkers(job *v1alpha1.HPCJob, now time.Time) (live []*corev1.Pod, deleting int) {
	for _, p := range c.jobPods(job.Namespace, job.Name, job.UID, now) {
		if p.Labels[v1alpha1.LabelRole] != v1alpha1.RoleWorker {
			continue
		}
		if p.DeletionTimestamp != nil {
			deleting++
			continue
		}
		live = append(live, p)
	}
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return cmp.Compare(workerIndex(job.Name, a), workerIndex(job.Name, b)) })
	return live, deleting
}

// rescaleDue reports whether an elastic job's minimum gap since its last rescale has passed.
func rescaleDue(job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, now time.Time) bool {
	last := st.LastRescaleTime
	if last == nil {
		last = st.StartTime
	}
	return last == nil || !now.Before(last.Add(time.Duration(job.Spec.Elastic.RescaleGapSeconds)*time.Second))
}

// higherWaiting reports whether a gang of at least this priority waits in the queue: an
// elastic job never grows into room such a gang needs.
func (c *Controller) higherWaiting(prio int32) bool {
	for _, k := range c.queue.Keys() {
		if e, _ := c.queue.Get(k); e.Kind == queue.Gang && e.Priority >= prio {
			return true
		}
	}
	return false
}

// runningJob returns a job, decoded, and its status when it is running.
func (c *Controller) runningJob(ns, name string) (*unstructured.Unstructured, *v1alpha1.HPCJob, *v1alpha1.HPCJobStatus, bool) {
	u, ok := c.jobObject(ns, name)
	if !ok {
		return nil, nil, nil, false
	}
	job, err := decodeJob(u)
	if err != nil {
		return nil, nil, nil, false
	}
	st := c.statusOf(ns+"/"+name, job)
	return u, job, st, st.Phase == v1alpha1.PhaseRunning
}

// attemptExpand places the workers a running job still lacks (a gang started with
// minAvailable) or, for an elastic job, as many new workers as fit up to maxReplicas:
//  1. a job no longer running leaves the queue; one with workers still being deleted, or an
//     elastic one whose rescale is not due or that a higher-priority gang waits for, backs off;
//  2. the live workers make the gang's base (expansionOf);
//  3. the waiting workers are placed, or the most new elastic workers that fit (grow);
//  4. new workers on their node's network get their sshd ports, and the expansion is committed.
func (c *Controller) attemptExpand(ctx context.Context, e *queue.Entry, now time.Time) {
	ns, name := splitKey(strings.TrimPrefix(e.Key, expandPrefix+"HPCJob "))
	u, job, st, ok := c.runningJob(ns, name)
	if !ok {
		c.queue.Remove(e.Key)
		return
	}
	workers, deleting := c.liveWorkers(job, now)
	el := job.Spec.Elastic
	if deleting > 0 || (el != nil && (!rescaleDue(job, st, now) || c.higherWaiting(e.Priority))) {
		c.queue.Failed(e.Key, now)
		return
	}
	x := expansionOf(job, workers)
	snap := c.snapshot(now)
	g, fresh, res, err := c.grow(snap, job, x)
	if err == nil && res != nil {
		fresh, err = c.withSSHPorts(job, snap, g, res, fresh)
	}
	if err != nil || res == nil {
		c.queue.Failed(e.Key, now)
		return
	}
	names := make([]string, len(fresh))
	for i, p := range fresh {
		names[i] = p.Name
	}
	if err := c.nameTaken(job, names...); err != nil {
		c.blocked(u, e, err, now)
		return
	}
	c.commitExpand(ctx, snap, e, u, job, st, g, res, workers, fresh, now)
}

// expansion is a running job's gang of live workers, to which new workers are added.
type expansion struct {
	base *plan.Gang
	wc   *plan.Constraints
	// live and waiting count the live workers and those not bound yet; next is the index the
	// next new worker gets.
	live, waiting, next int
}

func expansionOf(job *v1alpha1.HPCJob, workers []*corev1.Pod) expansion {
	x := expansion{wc: plan.ConstraintsOf(&job.Spec.Worker.Spec), live: len(workers),
		base: &plan.Gang{Key: snapshot.HPCJobKey(job.Namespace, job.Name), ExclusiveNodes: job.Spec.ExclusiveNodes, Policy: plan.LeastLoaded}}
	if job.Spec.Placement == v1alpha1.MostLoaded {
		x.base.Policy = plan.MostLoaded
	}
	for _, p := range workers {
		x.base.Members = append(x.base.Members, plan.MemberFromPod(p, annotationInt(p, v1alpha1.AnnotationGroup), x.wc))
		if p.Spec.NodeName == "" {
			x.waiting++
		}
		x.next = max(x.next, workerIndex(job.Name, p)+1)
	}
	return x
}

// grow plans the expansion: the waiting workers, at least one more of them bound, when any
// wait; else for an elastic job the most new workers (ElasticWorker) that fit, found by binary
// search. It returns a nil result when there is nothing to do.
func (c *Controller) grow(snap *snapshot.Snapshot, job *v1alpha1.HPCJob, x expansion) (*plan.Gang, []*corev1.Pod, *plan.Result, error) {
	try := func(k int) (*plan.Gang, []*corev1.Pod, *plan.Result, error) {
		g := *x.base
		g.Members = slices.Clone(x.base.Members)
		var fresh []*corev1.Pod
		for i := range k {
			w := hpcjob.ElasticWorker(job, x.next+i)
			pod := hpcjob.WorkerPod(job, w, c.opts.SchedulerName)
			fresh = append(fresh, pod)
			g.Members = append(g.Members, plan.MemberFromPod(pod, w.Group, x.wc))
		}
		for _, m := range g.Members {
			g.Groups = max(g.Groups, m.Group+1)
		}
		if k == 0 {
			g.MinAvailable = x.live - x.waiting + 1
		}
		res, err := plan.Plan(snap, &g)
		return &g, fresh, res, err
	}
	el := job.Spec.Elastic
	switch {
	case x.waiting > 0:
		return try(0)
	case el == nil:
		return nil, nil, nil, nil
	}
	var g *plan.Gang
	var fresh []*corev1.Pod
	var res *plan.Result
	lo, hi := 0, int(el.MaxReplicas)-x.live
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if mg, mf, mr, merr := try(mid); merr == nil {
			g, fresh, res, lo = mg, mf, mr, mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return nil, nil, nil, fmt.Errorf("no room for another worker")
	}
	return g, fresh, res, nil
}

// withSSHPorts gives new workers on their node's network the sshd ports free on the nodes the
// plan chose for them, rebuilding their pods.
func (c *Controller) withSSHPorts(job *v1alpha1.HPCJob, s *snapshot.Snapshot, g *plan.Gang, res *plan.Result, fresh []*corev1.Pod) ([]*corev1.Pod, error) {
	if len(fresh) == 0 || !hpcjob.OnHostNetwork(job) {
		return fresh, nil
	}
	nodeOf := map[string]string{}
	for _, pl := range res.Placements {
		nodeOf[g.Members[pl.Member].Name] = pl.Node
	}
	ws := make([]hpcjob.Worker, len(fresh))
	nodes := make([]string, len(fresh))
	for i, p := range fresh {
		ws[i], nodes[i] = hpcjob.WorkerOf(job, p), nodeOf[p.Name]
	}
	if err := hpcjob.AssignSSHPorts(job, s, c.opts.SSHPorts, ws, nodes); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(fresh))
	for i, w := range ws {
		out[i] = hpcjob.WorkerPod(job, w, c.opts.SchedulerName)
	}
	return out, nil
}

func (c *Controller) commitExpand(ctx context.Context, snap *snapshot.Snapshot, e *queue.Entry, u *unstructured.Unstructured,
	job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, g *plan.Gang, res *plan.Result, workers, fresh []*corev1.Pod, now time.Time) {
	op := &bindOp{key: e.Key, kind: opExpand, entry: *e, job: job, jobObj: u, started: now}
	byName := map[string]*corev1.Pod{}
	for _, p := range workers {
		byName[p.Name] = p
	}
	for _, p := range fresh {
		byName[p.Name] = p
	}
	isFresh := map[string]bool{}
	for _, p := range fresh {
		isFresh[p.Name] = true
	}
	for _, pl := range res.Placements {
		m := &g.Members[pl.Member]
		pod := byName[m.Name]
		if isFresh[m.Name] {
			pod.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(pl.NUMA)
		}
		op.targets = append(op.targets, &target{pod: pod, create: isFresh[m.Name], node: pl.Node, numa: pl.NUMA, role: v1alpha1.RoleWorker})
		st.Placements = append(st.Placements, v1alpha1.WorkerPlacement{Worker: m.Name, Tasks: int32(annotationInt(pod, v1alpha1.AnnotationTasks)),
			Group: int32(m.Group), Node: pl.Node, NUMANode: int32(pl.NUMA)})
	}
	before := len(workers)
	if len(fresh) > 0 {
		all := append(slices.Clone(workers), fresh...)
		var ws []hpcjob.Worker
		for _, p := range all {
			ws = append(ws, hpcjob.WorkerOf(job, p))
		}
		op.configMap = hpcjob.HostfileConfigMap(job, ws)
		st.Workers = int32(len(all))
		st.LastRescaleTime = &metav1.Time{Time: now}
	}
	st.Nodes = int32(distinctNodes(st.Placements))
	msg := fmt.Sprintf("placed %d more workers: %d of %d workers bound", len(res.Placements), len(st.Placements), st.Workers)
	if len(fresh) > 0 {
		msg = fmt.Sprintf("expanded from %d to %d workers", before, st.Workers)
	}
	setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonRescaled, msg)
	op.status = st
	c.commit(ctx, snap, op)
}

func distinctNodes(ps []v1alpha1.WorkerPlacement) int {
	seen := map[string]bool{}
	for _, p := range ps {
		seen[p.Node] = true
	}
	return len(seen)
}

// shrinkSuffix keys, in lastReason, why a gang shrinks no other job.
const shrinkSuffix = " (shrink)"

// victim is a running elastic job that may give up workers.
type victim struct {
	u         *unstructured.Unstructured
	job       *v1alpha1.HPCJob
	st        *v1alpha1.HPCJobStatus
	removable []*corev1.Pod // highest index first
	workers   []*corev1.Pod
	priority  int32
}

// tryShrink frees room for a gang that does not fit by shrinking running elastic jobs the shrink
// scope lets it shrink — of strictly lower priority, in its namespace under ScopeNamespace —
// lowest priority first, then the most recently started, never below their minReplicas nor
// sooner than their rescale gap, and only by as many workers as the gang needs: replan answers
// whether the gang fits once a set of pods is gone. An HPCJob must first show that the API server
// admits its pods (podsAdmitted): the priority it claims is then one its namespace may use.
// u is the HPCJob of the gang, nil for plain pods (their pods passed admission already).
func (c *Controller) tryShrink(ctx context.Context, e *queue.Entry, u *unstructured.Unstructured, replan func(*snapshot.Snapshot) error, now time.Time) {
	if replan == nil || e.Kind != queue.Gang {
		return
	}
	victims := c.victims(e, now)
	if len(victims) == 0 {
		return
	}
	if u != nil {
		job, err := decodeJob(u)
		if err == nil {
			err = c.podsAdmitted(ctx, job)
		}
		if err != nil {
			msg := "no elastic job is shrunk for this job: " + err.Error()
			if c.lastReason[e.Key+shrinkSuffix] != msg {
				c.lastReason[e.Key+shrinkSuffix] = msg
				c.event(u, true, ReasonNotAdmitted, "%s", msg)
			}
			return
		}
	}
	pods, _ := c.pods.List(labels.Everything())
	gone := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			gone[podKey(p)] = true
		}
	}
	fits := func(extra []*corev1.Pod) bool {
		g := make(map[string]bool, len(gone)+len(extra))
		for k := range gone {
			g[k] = true
		}
		for _, p := range extra {
			g[podKey(p)] = true
		}
		return replan(c.snapshotWithout(now, g)) == nil
	}
	var removal []*corev1.Pod
	for _, v := range victims {
		removal = append(removal, v.removable...)
	}
	if fits(nil) || !fits(removal) {
		return
	}
	lo, hi := 1, len(removal)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fits(removal[:mid]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	chosen := map[string]bool{}
	for _, p := range removal[:lo] {
		chosen[podKey(p)] = true
	}
	for _, v := range victims {
		c.shrink(ctx, v, chosen, e, now)
	}
}

func (c *Controller) victims(e *queue.Entry, now time.Time) []*victim {
	objs, _ := c.jobs.List(labels.Everything())
	var out []*victim
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		// Cheap filters first: most jobs are not elastic.
		if _, elastic, _ := unstructured.NestedMap(u.Object, "spec", "elastic"); !elastic {
			continue
		}
		job, err := decodeJob(u)
		if err != nil || job.Spec.Elastic == nil {
			continue
		}
		prio, _ := c.priorityOf(job)
		if !c.opts.ShrinkScope.MayShrink(claimOf(e), priority.Claim{Namespace: job.Namespace, Priority: prio}) {
			continue
		}
		st := c.statusOf(u.GetNamespace()+"/"+u.GetName(), job)
		if st.Phase != v1alpha1.PhaseRunning || !rescaleDue(job, st, now) {
			continue
		}
		workers, deleting := c.liveWorkers(job, now)
		extra := len(workers) - int(job.Spec.Elastic.MinReplicas)
		if deleting > 0 || extra <= 0 {
			continue
		}
		v := &victim{u: u, job: job, st: st, workers: workers, priority: prio}
		for i := len(workers) - 1; i >= len(workers)-extra; i-- {
			v.removable = append(v.removable, workers[i])
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *victim) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), b.st.StartTime.Compare(a.st.StartTime.Time),
			cmp.Compare(a.u.GetNamespace()+"/"+a.u.GetName(), b.u.GetNamespace()+"/"+b.u.GetName()))
	})
	return out
}

// shrink removes a victim's chosen workers, rewrites its hostfile and reports the rescale.
func (c *Controller) shrink(ctx context.Context, v *victim, chosen map[string]bool, beneficiary *queue.Entry, now time.Time) {
	var drop, keep []*corev1.Pod
	for _, p := range v.workers {
		if chosen[podKey(p)] {
			drop = append(drop, p)
		} else {
			keep = append(keep, p)
		}
	}
	if len(drop) == 0 {
		return
	}
	job, st := v.job, v.st
	var ws []hpcjob.Worker
	for _, p := range keep {
		ws = append(ws, hpcjob.WorkerOf(job, p))
	}
	cm := hpcjob.HostfileConfigMap(job, ws)
	c.binds.Add(1)
	go func() {
		defer c.binds.Done()
		if err := c.applyConfigMap(ctx, job, cm); err != nil {
			c.log.Warn("rewrite hostfile after shrink failed", "job", job.Namespace+"/"+job.Name, "err", err)
		}
	}()
	c.deletePods(ctx, job, drop, nil)
	dropped := map[string]bool{}
	for _, p := range drop {
		dropped[p.Name] = true
	}
	st.Placements = slices.DeleteFunc(st.Placements, func(p v1alpha1.WorkerPlacement) bool { return dropped[p.Worker] })
	before := st.Workers
	st.Workers = int32(len(keep))
	st.Nodes = int32(distinctNodes(st.Placements))
	st.LastRescaleTime = &metav1.Time{Time: now}
	msg := fmt.Sprintf("shrunk from %d to %d workers so that %s (priority %d) fits", before, st.Workers, beneficiary.Key, beneficiary.Priority)
	setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonRescaled, msg)
	c.writeStatus(ctx, v.u, st)
	c.event(v.u, false, ReasonRescaled, "%s", msg)
	c.metrics.Rescales.WithLabelValues("shrink").Inc()
	c.log.Info("elastic job shrunk", "job", job.Namespace+"/"+job.Name, "from", before, "to", st.Workers, "for", beneficiary.Key)
}
