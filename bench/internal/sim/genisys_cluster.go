package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// genisysCluster is one scenario's cluster: who places the steps and the services, and how the
// services are sized.
type genisysCluster interface {
	// physical is each node's CPUs.
	physical() []int
	// floating reports whether node i's steps and service pods float over the same CPUs (Slurm
	// and kube-scheduler both claim them), so that they interfere beyond time-sharing.
	floating(i int) bool
	// start places step id and returns its ranks on each node, or false when it does not fit now.
	start(now time.Duration, id int) ([]int, bool, error)
	// finish gives a step's CPUs back.
	finish(id int) error
	// pods are service k's running pods.
	pods(k int) []genisysPod
	// control runs one period of the services' sizing, with each service's latency over the
	// period; it reports whether CPU was given back (a waiting step may fit now).
	control(now time.Duration, latency []float64) (bool, error)
	// settle gives the services what became possible since (a step ended): pending pods placed,
	// waiting growths made; it reports whether CPU was given back.
	settle(now time.Duration) (bool, error)
}

// genisysPod is one service pod: its node and its CPU (request and limit).
type genisysPod struct {
	node  int
	milli int64
}

// genisysNode is one node of a static scenario: its CPUs, and how many of them Slurm and
// kube-scheduler each believe theirs. Where they add up to more than the node has, the two
// oversubscribe it.
type genisysNode struct {
	cpus, slurm, kube int
}

// staticCluster is a scenario without finegrain: Slurm places the steps node-filling (its nodes
// in order, each filled before the next, the default block distribution) on the CPUs it owns,
// and kube-scheduler places every service's pods once, at the size that meets its target at its
// peak rate, least-allocated over the CPUs it owns; a pod that fits nowhere stays pending.
type staticCluster struct {
	nodes     []genisysNode
	slurmUsed []int
	steps     [][]int
	svcPods   [][]genisysPod
	// pending counts each service's pods kube-scheduler could not place.
	pending []int
	tasks   []int
}

func newStaticCluster(nodes []genisysNode, w *GenisysWorkload) *staticCluster {
	c := &staticCluster{nodes: nodes, slurmUsed: make([]int, len(nodes)), steps: make([][]int, w.Steps()),
		svcPods: make([][]genisysPod, len(w.Services)), pending: make([]int, len(w.Services))}
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			c.tasks = append(c.tasks, s.Tasks)
		}
	}
	kubeUsed := make([]int64, len(nodes))
	for k := range w.Services {
		s := &w.Services[k]
		total := s.ProvisionedMilli()
		replicas := (total + s.MaxPodCPUMilli - 1) / s.MaxPodCPUMilli
		milli := (total + replicas - 1) / replicas
		for range replicas {
			best := -1
			for i, n := range nodes {
				if int64(n.kube)*1000-kubeUsed[i] < milli {
					continue
				}
				if best < 0 || snapshot.CompareLoad(kubeUsed[i], int64(n.kube)*1000, kubeUsed[best], int64(nodes[best].kube)*1000) < 0 {
					best = i
				}
			}
			if best < 0 {
				c.pending[k]++
				continue
			}
			kubeUsed[best] += milli
			c.svcPods[k] = append(c.svcPods[k], genisysPod{node: best, milli: milli})
		}
	}
	return c
}

func (c *staticCluster) physical() []int {
	out := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.cpus
	}
	return out
}

func (c *staticCluster) floating(i int) bool { n := c.nodes[i]; return n.slurm+n.kube > n.cpus }

func (c *staticCluster) start(_ time.Duration, id int) ([]int, bool, error) {
	free := 0
	for i, n := range c.nodes {
		free += n.slurm - c.slurmUsed[i]
	}
	if free < c.tasks[id] {
		return nil, false, nil
	}
	ranks := make([]int, len(c.nodes))
	left := c.tasks[id]
	for i, n := range c.nodes {
		take := min(n.slurm-c.slurmUsed[i], left)
		ranks[i], left = take, left-take
		c.slurmUsed[i] += take
	}
	c.steps[id] = ranks
	return ranks, true, nil
}

func (c *staticCluster) finish(id int) error {
	for i, r := range c.steps[id] {
		c.slurmUsed[i] -= r
	}
	c.steps[id] = nil
	return nil
}

func (c *staticCluster) pods(k int) []genisysPod { return c.svcPods[k] }

// control and settle change nothing: a static scenario's services keep their size.
func (c *staticCluster) control(time.Duration, []float64) (bool, error) { return false, nil }

func (c *staticCluster) settle(time.Duration) (bool, error) { return false, nil }

// finegrainCluster is a finegrain scenario: every step is an HPCJob of one-CPU tasks that the
// placer's own code plans and binds (hpcjob.PlanJob on its snapshot, workers pinned by the node
// agents' allocators), and every service a ServiceObjective whose size objective.Decide sets
// each period, applied as the placer's objective loop applies it (pkg/placer/objectives): each
// running pod resized in place, the replicas scaled. Service pods are plain pods in the nodes'
// shared pools, so the placer sees their requests and they never take a pinned CPU.
type finegrainCluster struct {
	f    *finegrain
	runs []run
	svc  []*genisysObjective
	cpus int
}

// genisysObjective is one service under its objective: the law's policy and history, the size
// last decided (the objective's status) and the service's pods.
type genisysObjective struct {
	name    string
	policy  objective.Policy
	history objective.History
	decided objective.Size
	pods    []*servicePod
	serial  int
}

// servicePod is one pod of a service: bound to node (or pending, node −1, until kube-scheduler
// finds a node with room), running with cpu and memory, and asked for want and wantMemory — a
// growth its node has no room for waits (the kubelet's Deferred resize) and blocks growth in
// place.
type servicePod struct {
	name             string
	node             int
	obj              *corev1.Pod
	cpu, memory      int64
	want, wantMemory int64
}

// genisysStrategies are the placer strategies of the finegrain scenarios: one worker per task
// (granularity), the task groups spread over the nodes in the placement policy's order — the
// most-loaded policy gives the larger groups to the fuller nodes. (Granularity none, workers of a
// whole NUMA node, fragments: with one CPU of every node kept shared and service pods beside
// them, a node takes one 8-CPU worker, and the steps get 40 of the 80 CPUs.)
var genisysStrategies = map[v1alpha1.PlacementPolicy]string{
	v1alpha1.LeastLoaded: "finegrain-granularity-least",
	v1alpha1.MostLoaded:  "finegrain-granularity-most",
}

func newFinegrainCluster(p v1alpha1.PlacementPolicy, topo *topology.Topology, w *GenisysWorkload) (*finegrainCluster, error) {
	name := genisysStrategies[p]
	all := Strategies()
	k := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == name })
	if k < 0 {
		return nil, fmt.Errorf("placement %s: no strategy %s", p, name)
	}
	f, err := newFinegrain(all[k], topo, GenisysNodes, 0, w.Steps(), 0)
	if err != nil {
		return nil, err
	}
	c := &finegrainCluster{f: f, runs: make([]run, 0, w.Steps()), cpus: topo.NumCPUs()}
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			job := &Job{Name: s.Name, Arrival: j.Submit, Runtime: s.Runtime, Spec: v1alpha1.HPCJobSpec{
				Tasks: int32(s.Tasks), Placement: p,
				TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
			}}
			v1alpha1.SetDefaults(&job.Spec)
			c.runs = append(c.runs, run{job: job, index: len(c.runs), state: queued})
		}
	}
	for _, s := range w.Services {
		spec := genisysObjectiveSpec(&s)
		v1alpha1.SetServiceObjectiveDefaults(&spec)
		obj := &v1alpha1.ServiceObjective{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: Namespace}, Spec: spec}
		if errs := v1alpha1.ValidateServiceObjective(obj); len(errs) > 0 {
			return nil, fmt.Errorf("service %s: %w", s.Name, errs.ToAggregate())
		}
		pol := objective.PolicyFor(&obj.Spec)
		o := &genisysObjective{name: s.Name, policy: pol}
		o.scale(objective.Start(pol.Bounds))
		c.svc = append(c.svc, o)
	}
	if _, err := c.settle(0); err != nil {
		return nil, err
	}
	return c, nil
}

// genisysObjectiveSpec is a service's ServiceObjective: its latency at most the target, pods of
// 1 core (the default minimum) to MaxPodCPUMilli, 1 to MaxReplicas of them.
func genisysObjectiveSpec(s *GenisysService) v1alpha1.ServiceObjectiveSpec {
	return v1alpha1.ServiceObjectiveSpec{
		TargetRef: v1alpha1.ObjectiveTargetRef{Kind: v1alpha1.TargetDeployment, Name: s.Name},
		Metric: v1alpha1.ObjectiveMetric{
			Target: *resource.NewMilliQuantity(int64(math.Round(s.Target*1000)), resource.DecimalSI), Direction: v1alpha1.AtMost,
			Source: v1alpha1.MetricSource{Pods: &v1alpha1.PodsMetricSource{Port: 9090, Metric: "request_latency_seconds"}},
		},
		PodBounds: v1alpha1.PodBounds{Max: v1alpha1.PodSize{
			CPU: *resource.NewMilliQuantity(s.MaxPodCPUMilli, resource.DecimalSI), Memory: resource.MustParse("4Gi"),
			IOBandwidth: resource.MustParse("100M"),
		}},
		Replicas: v1alpha1.ReplicaBounds{Max: s.MaxReplicas},
	}
}

func (c *finegrainCluster) physical() []int {
	out := make([]int, GenisysNodes)
	for i := range out {
		out[i] = c.cpus
	}
	return out
}

// floating is false: finegrain's ranks hold exclusive CPUs, its services only the shared pool.
func (c *finegrainCluster) floating(int) bool { return false }

func (c *finegrainCluster) start(now time.Duration, id int) ([]int, bool, error) {
	if _, err := c.f.view(now, true); err != nil {
		return nil, false, err
	}
	r := &c.runs[id]
	a, err := c.f.place(r)
	if err != nil || a.reason != "" {
		return nil, false, err
	}
	r.state = running
	ranks := make([]int, GenisysNodes)
	for _, p := range a.workers {
		ranks[p.Node] += p.Tasks
	}
	return ranks, true, nil
}

func (c *finegrainCluster) finish(id int) error {
	r := &c.runs[id]
	if err := c.f.release(r); err != nil {
		return err
	}
	r.state = done
	return nil
}

func (c *finegrainCluster) pods(k int) []genisysPod {
	var out []genisysPod
	for _, p := range c.svc[k].pods {
		if p.node >= 0 {
			out = append(out, genisysPod{node: p.node, milli: p.cpu})
		}
	}
	return out
}

// control runs one period of every service's objective as the placer's loop does: the current
// size is the one last decided, its CPU and memory lowered to the smallest a blocked pod runs
// with when a pod's growth waits for room (then growth in place is blocked); objective.Decide
// takes it, the period's latency and the history; the decided size is asked of every pod and
// the replicas scaled to it. Then settle applies what the nodes admit.
func (c *finegrainCluster) control(now time.Duration, latency []float64) (bool, error) {
	for k, o := range c.svc {
		cur := o.decided
		blocked := false
		var cpu, memory int64
		for _, p := range o.pods {
			if p.node < 0 || p.want <= p.cpu {
				continue
			}
			if !blocked || p.cpu < cpu {
				cpu = p.cpu
			}
			if !blocked || p.memory < memory {
				memory = p.memory
			}
			blocked = true
		}
		if blocked {
			cur.CPUMilli = min(cur.CPUMilli, max(cpu, o.policy.Bounds.Min.CPUMilli))
			cur.MemoryBytes = min(cur.MemoryBytes, max(memory, o.policy.Bounds.Min.MemoryBytes))
		}
		var d objective.Decision
		d, o.history = objective.Decide(o.policy, o.history, objective.Input{Current: cur, Measured: latency[k], InPlaceBlocked: blocked})
		o.scale(d.Size)
	}
	return c.settle(now)
}

// scale records a decided size: every pod is asked for its per-pod size; replicas beyond the
// decided count go — pending ones first, then the newest, as a ReplicaSet scales down — and
// missing ones are created pending.
func (o *genisysObjective) scale(s objective.Size) {
	o.decided = s
	for len(o.pods) > int(s.Replicas) {
		k := slices.IndexFunc(o.pods, func(p *servicePod) bool { return p.node < 0 })
		if k < 0 {
			k = len(o.pods) - 1
		}
		o.pods[k].want = 0
		o.pods = slices.Delete(o.pods, k, k+1)
	}
	for len(o.pods) < int(s.Replicas) {
		o.serial++
		o.pods = append(o.pods, &servicePod{name: fmt.Sprintf("%s-%d", o.name, o.serial), node: -1})
	}
	for _, p := range o.pods {
		p.want, p.wantMemory = s.CPUMilli, s.MemoryBytes
	}
}

// settle applies what the nodes admit, service by service: pods scaled away are deleted, a pod
// shrinks at once, grows when its node has the room (a waiting growth is retried each time), and
// a pending pod is placed least-allocated where its size fits, as kube-scheduler does. It reports
// whether CPU was given back (a waiting step may fit now).
func (c *finegrainCluster) settle(now time.Duration) (bool, error) {
	free, err := c.freeMilli(now)
	if err != nil {
		return false, err
	}
	freed := false
	for _, o := range c.svc {
		live := map[string]bool{}
		for _, p := range o.pods {
			live[p.name] = true
		}
		for _, pod := range c.boundPods(o) {
			if !live[pod.Name] {
				free[c.f.byName[pod.Spec.NodeName]] += pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
				c.deletePod(pod)
				freed = true
			}
		}
		for _, p := range o.pods {
			switch {
			case p.node < 0:
				best := -1
				for i := range free {
					if free[i] >= p.want && (best < 0 || free[i] > free[best]) {
						best = i
					}
				}
				if best >= 0 {
					p.node = best
					free[best] -= p.want
					c.bindPod(o, p)
				}
			case p.want < p.cpu || (p.want > p.cpu && free[p.node] >= p.want-p.cpu):
				freed = freed || p.want < p.cpu
				free[p.node] -= p.want - p.cpu
				c.bindPod(o, p)
			}
		}
	}
	return freed, nil
}

// freeMilli is each node's allocatable CPU less its pods' requests, as the placer's snapshot
// counts them.
func (c *finegrainCluster) freeMilli(now time.Duration) ([]int64, error) {
	if _, err := c.f.view(now, true); err != nil {
		return nil, err
	}
	out := make([]int64, GenisysNodes)
	for i := range out {
		k, ok := c.f.snap.NodeIndex(nodeName(i))
		if !ok {
			return nil, fmt.Errorf("node %s is not in the placer's snapshot", nodeName(i))
		}
		n := &c.f.snap.Nodes[k]
		out[i] = n.Allocatable.MilliCPU - n.Requested.MilliCPU
	}
	return out, nil
}

// genisysServiceLabel names a service pod's service.
const genisysServiceLabel = "genisys.finegrain.dev/service"

// boundPods are the service's pods the cluster holds, by name.
func (c *finegrainCluster) boundPods(o *genisysObjective) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.f.pods {
		if p.Labels[genisysServiceLabel] == o.name {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// bindPod binds a service pod at its wanted size (or re-binds it, as an in-place resize does).
func (c *finegrainCluster) bindPod(o *genisysObjective, p *servicePod) {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.want, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.wantMemory, resource.BinarySI),
	}
	p.obj = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: Namespace, Labels: map[string]string{genisysServiceLabel: o.name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "service",
			Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}}},
	}
	p.cpu, p.memory = p.want, p.wantMemory
	c.f.bind(p.obj, nodeName(p.node))
	c.f.changed(p.node)
}

func (c *finegrainCluster) deletePod(pod *corev1.Pod) {
	delete(c.f.pods, pod.UID)
	c.f.podEvents = append(c.f.podEvents, podEvent{pod: pod, deleted: true})
	c.f.changed(c.f.byName[pod.Spec.NodeName])
}
