package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
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
// minAvailable) or, for an elastic job with a rescale hook, as many new workers as fit up to
// maxReplicas (completeJob's growth):
//  1. a job no longer running leaves the queue; one with workers still being deleted or a rescale
//     under way backs off, and so does an elastic one that may not grow now (mayGrow);
//  2. the live workers make the gang's base (expansionOf);
//  3. the waiting workers are placed, or the most new elastic workers that fit (grow);
//  4. new workers on their node's network get their sshd ports, and the expansion is committed:
//     an elastic growth then goes on with the rescale protocol (startGrowth).
func (c *Controller) attemptExpand(ctx context.Context, e *queue.Entry, now time.Time) {
	ns, name := splitKey(strings.TrimPrefix(e.Key, expandPrefix+"HPCJob "))
	u, job, st, ok := c.runningJob(ns, name)
	if !ok {
		c.queue.Remove(e.Key)
		return
	}
	workers, deleting := c.liveWorkers(job, now)
	if deleting > 0 || c.inflight[rescaleKey(ns, name)] != nil {
		c.queue.Failed(e.Key, now)
		return
	}
	x := expansionOf(job, workers)
	x.base.NoTaskGroups = !c.opts.TaskGroups
	snap := c.snapshot(now)
	var launcher *corev1.Pod
	if x.waiting == 0 && job.Spec.Elastic != nil {
		launcher = c.rescalableLauncher(job, now)
		if launcher == nil || !c.mayGrow(u, job, st, e, snap, now) {
			c.queue.Failed(e.Key, now)
			return
		}
	}
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
	c.commitExpand(ctx, snap, e, u, job, st, g, res, workers, fresh, launcher, now)
}

// elasticJob is a running HPCJob as the elastic policy sees it; rescalable says whether it can
// be told of a new size now (a hook, a launcher to call it in, no rescale under way).
func elasticJob(u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, prio int32, workers int, rescalable bool) elastic.Job {
	last := st.LastRescaleTime
	if last == nil {
		last = st.StartTime
	}
	j := elastic.Job{Key: snapshot.HPCJobKey(job.Namespace, job.Name), Priority: prio, Submitted: u.GetCreationTimestamp().Time,
		Min: int(job.Spec.Elastic.MinReplicas), Max: int(job.Spec.Elastic.MaxReplicas), Workers: workers, Rescalable: rescalable,
		Gap: time.Duration(job.Spec.Elastic.RescaleGapSeconds) * time.Second}
	if last != nil {
		j.LastRescale = last.Time
	}
	return j
}

// rescalableLauncher returns the launcher a running job's rescale hook is called in: nil when the
// job has no hook, or its launcher is not running with an address yet.
func (c *Controller) rescalableLauncher(job *v1alpha1.HPCJob, now time.Time) *corev1.Pod {
	if job.Spec.Elastic == nil || job.Spec.Elastic.RescaleHook == nil || c.inflight[rescaleKey(job.Namespace, job.Name)] != nil {
		return nil
	}
	for _, p := range c.jobPods(job.Namespace, job.Name, job.UID, now) {
		if p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleLauncher && p.DeletionTimestamp == nil &&
			p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p
		}
	}
	return nil
}

// mayGrow is completeJob's rule for a running elastic job: out of its rescale gap, and no gang
// waiting that comes before it (higher priority, aged with Options.Aging, or equal and submitted
// earlier) and could start now — a waiting gang that does not fit, however high its priority,
// does not hold it back.
func (c *Controller) mayGrow(u *unstructured.Unstructured, job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, e *queue.Entry, snap *snapshot.Snapshot, now time.Time) bool {
	j := elasticJob(u, job, st, e.Priority, int(st.Workers), true)
	var waiting []elastic.Job
	for _, k := range c.queue.Keys() {
		if w, _ := c.queue.Get(k); w.Kind == queue.Gang {
			waiting = append(waiting, elastic.Job{Key: w.Key, Priority: c.queue.Priority(w, now), Submitted: w.Created})
		}
	}
	return elastic.MayGrow(j, waiting, now, func(w elastic.Job) bool { return c.startsNow(w.Key, snap) })
}

// startsNow reports whether a waiting gang would start now: an HPCJob that fits the snapshot
// (an elastic one at its minimum), a gang of plain pods whose last attempt found room (it fails
// otherwise, and is retried as room appears).
func (c *Controller) startsNow(key string, snap *snapshot.Snapshot) bool {
	rest, ok := strings.CutPrefix(key, "HPCJob ")
	if !ok {
		return c.lastReason[key] == ""
	}
	ns, name := splitKey(rest)
	u, ok := c.jobObject(ns, name)
	if !ok {
		return false
	}
	job, err := decodeJob(u)
	if err != nil {
		return false
	}
	_, err = hpcjob.PlanJob(snap, job, c.planOptions())
	return err == nil
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

// commitExpand binds an expansion. Placing waiting workers completes the job's gang; an elastic
// growth (fresh workers, launcher the job's running launcher) only binds the new workers and
// records them in the status — the worker count, the hostfile and the hook follow once they are
// Ready (startGrowth, when the binding finishes).
func (c *Controller) commitExpand(ctx context.Context, snap *snapshot.Snapshot, e *queue.Entry, u *unstructured.Unstructured,
	job *v1alpha1.HPCJob, st *v1alpha1.HPCJobStatus, g *plan.Gang, res *plan.Result, workers, fresh []*corev1.Pod, launcher *corev1.Pod, now time.Time) {
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
	st.Nodes = int32(distinctNodes(st.Placements))
	if len(fresh) > 0 {
		op.growth = newRescale(job, u, launcher, v1alpha1.RescaleExpand, workers, append(slices.Clone(workers), fresh...))
		op.growth.fresh = fresh
		setCondition(st, ConditionRescaling, metav1.ConditionTrue, ReasonRescaling,
			fmt.Sprintf("growing from %d to %d workers: binding the new workers", len(workers), len(workers)+len(fresh)))
	} else {
		setCondition(st, ConditionScheduled, metav1.ConditionTrue, ReasonRescaled,
			fmt.Sprintf("placed %d more workers: %d of %d workers bound", len(res.Placements), len(st.Placements), st.Workers))
	}
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

// victim is a running elastic job the shrink scope lets a gang shrink.
type victim struct {
	u        *unstructured.Unstructured
	job      *v1alpha1.HPCJob
	launcher *corev1.Pod
	// workers are its live workers by index; policy is the job as the elastic policy sees it.
	workers []*corev1.Pod
	policy  elastic.Job
}

// tryShrink is the elastic scheduler's newJob for a gang that does not fit: when shrinking the
// running elastic jobs it may shrink (the shrink scope's, with a rescale hook) can free what the
// gang needs at its minimum, they are shrunk — lowest priority first, never below their
// minReplicas nor inside their rescale gap, their highest-numbered workers first — until the gang
// fits at its maximum (an elastic HPCJob's maxReplicas; any other gang has one size), each
// through the rescale protocol (startShrink). The gang starts on its own next attempt, once the
// workers are gone. The gang claims its own priority (e.Priority), never its priority aged with
// Options.Aging: waiting orders the queue but gives no right to shrink another job. An HPCJob must
// first show that the API server admits its pods (podsAdmitted):
// the priority it claims is then one its namespace may use. replan answers whether a gang of one
// size fits a snapshot; u is the HPCJob of the gang, nil for plain pods (their pods passed
// admission already).
func (c *Controller) tryShrink(ctx context.Context, e *queue.Entry, u *unstructured.Unstructured, replan func(*snapshot.Snapshot) error, now time.Time) {
	if replan == nil || e.Kind != queue.Gang {
		return
	}
	candidates := c.victims(e, now)
	if len(candidates) == 0 {
		return
	}
	gang := elastic.Job{Key: e.Key, Priority: e.Priority, Submitted: e.Created, Min: 1, Max: 1}
	fitAt := func(s *snapshot.Snapshot, _ int) error { return replan(s) }
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
		if el := job.Spec.Elastic; el != nil {
			gang.Min, gang.Max = int(el.MinReplicas), int(el.MaxReplicas)
			fitAt = func(s *snapshot.Snapshot, k int) error {
				_, err := hpcjob.PlanElasticAt(s, job, k, c.planOptions())
				return err
			}
		}
	}
	byKey := map[string]*victim{}
	running := make([]elastic.Job, len(candidates))
	for i, v := range candidates {
		byKey[v.policy.Key], running[i] = v, v.policy
	}
	victims := elastic.Victims(gang, running, now)
	pods, _ := c.pods.List(labels.Everything())
	gone := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			gone[podKey(p)] = true
		}
	}
	start := elastic.NewJob(gang, victims, func(k int, take []int) bool {
		g := maps.Clone(gone)
		for i, n := range take {
			for _, p := range byKey[victims[i].Key].leaving(n) {
				g[podKey(p)] = true
			}
		}
		return fitAt(c.snapshotWithout(now, g), k) == nil
	})
	if start.Workers == 0 {
		return
	}
	for _, sh := range start.Shrinks {
		c.startShrink(ctx, byKey[sh.Key], sh.To, e, now)
	}
}

// leaving returns the n workers a victim gives up: its highest-numbered.
func (v *victim) leaving(n int) []*corev1.Pod { return v.workers[len(v.workers)-n:] }

// victims returns the running elastic jobs the shrink scope lets gang e shrink, with what the
// elastic policy needs to know of them; Victims chooses among them.
func (c *Controller) victims(e *queue.Entry, now time.Time) []*victim {
	objs, _ := c.jobs.List(labels.Everything())
	var out []*victim
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		// Cheap filters first: most jobs are not elastic.
		if _, isElastic, _ := unstructured.NestedMap(u.Object, "spec", "elastic"); !isElastic {
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
		if st.Phase != v1alpha1.PhaseRunning || c.inflight[expandPrefix+snapshot.HPCJobKey(job.Namespace, job.Name)] != nil {
			continue
		}
		workers, deleting := c.liveWorkers(job, now)
		launcher := c.rescalableLauncher(job, now)
		v := &victim{u: u, job: job, launcher: launcher, workers: workers,
			policy: elasticJob(u, job, st, prio, len(workers), launcher != nil && deleting == 0 && len(workers) == int(st.Workers))}
		out = append(out, v)
	}
	return out
}

// shrinkFor is a shrink made for a waiting gang: the gang waits until its rescale ended and the
// workers that leave are gone, so that it starts with all the room newJob freed for it.
type shrinkFor struct {
	gang    string
	leaving []*corev1.Pod
}

// waitsForShrink reports whether a gang waits for a shrink made for it; it forgets the shrinks
// that are done (also those made for gangs gone since).
func (c *Controller) waitsForShrink(gang string) bool {
	waits := false
	for k, s := range c.shrinks {
		going := c.inflight[k] != nil
		for _, p := range s.leaving {
			if cur, err := c.pods.Pods(p.Namespace).Get(p.Name); err == nil && cur.UID == p.UID {
				going = true
			}
		}
		switch {
		case !going:
			delete(c.shrinks, k)
		case s.gang == gang:
			waits = true
		}
	}
	return waits
}

// startShrink starts the rescale protocol that shrinks a victim to to workers for gang
// beneficiary: the new hostfile is published, the hook called, and the leaving workers deleted
// once it acknowledged (finishRescale).
func (c *Controller) startShrink(ctx context.Context, v *victim, to int, beneficiary *queue.Entry, now time.Time) {
	job := v.job
	r := newRescale(job, v.u, v.launcher, v1alpha1.RescaleShrink, v.workers, v.workers[:to])
	r.leaving = v.leaving(len(v.workers) - to)
	r.beneficiary = fmt.Sprintf("%s (priority %d)", beneficiary.Key, beneficiary.Priority)
	st := c.statusOf(job.Namespace+"/"+job.Name, job)
	setCondition(st, ConditionRescaling, metav1.ConditionTrue, ReasonRescaling,
		fmt.Sprintf("shrinking from %d to %d workers so that %s fits", len(v.workers), to, r.beneficiary))
	c.writeStatus(ctx, v.u, st)
	c.event(v.u, false, ReasonRescaling, "%s", conditionMessage(st, ConditionRescaling))
	key := rescaleKey(job.Namespace, job.Name)
	c.shrinks[key] = shrinkFor{gang: beneficiary.Key, leaving: r.leaving}
	c.startRescale(ctx, r, now)
}
