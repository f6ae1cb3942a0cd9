//go:build e2e

// The multi-node suite, on a cluster of three real nodes on this host (make cluster-up NODES=3;
// make e2e runs it as its own pass): a gang of workers spread over the nodes by task group, each
// pinned by its own node's agent; least- and most-loaded jobs on the nodes those policies pick;
// an exclusive-nodes job keeping another HPC job off its node, in both directions; a real Open
// MPI job with a worker on each of two nodes running HPCC over the pod network, every rank bound
// to its worker's pin; and a node whose kubelet dies failing its job cleanly. The nodes share the
// host's CPUs: each node's agent pins real cpusets of them, so workers of different nodes may
// hold the same CPU (hack/cluster/README.md).
package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// Three one-CPU tasks become three workers in three task groups, one group per node; each
// worker runs on its placement's node, on that node's pod network, pinned by that node's agent.
func TestMultiNodeGangSpreadByTaskGroup(t *testing.T) {
	c := deployNodes(t)
	ns := c.Namespace(t)
	createJob(t, c, ns, podNetworkJob("spread", multiNodes))
	c.DumpOnFailure(t, ns)
	job := waitPhase(t, c, ns, "spread", v1alpha1.PhaseRunning, placerTimeout)
	if job.Status.Nodes != multiNodes || job.Status.Workers != multiNodes || job.Status.Groups != multiNodes {
		t.Errorf("status: %d nodes, %d workers, %d groups; want %d of each", job.Status.Nodes, job.Status.Workers, job.Status.Groups, multiNodes)
	}
	nodes, groups := map[string]string{}, map[int32]string{}
	for _, pl := range job.Status.Placements {
		if other, dup := nodes[pl.Node]; dup {
			t.Errorf("workers %s and %s are both on node %s", other, pl.Worker, pl.Node)
		}
		if other, dup := groups[pl.Group]; dup {
			t.Errorf("workers %s and %s are both in task group %d", other, pl.Worker, pl.Group)
		}
		nodes[pl.Node], groups[pl.Group] = pl.Worker, pl.Worker
	}
	for name, pod := range workerPods(t, c, ns, job) {
		pin := pinOf(t, c, pod, "worker")
		if pin.cpus.Size() != 1 {
			t.Errorf("worker %s of one task is pinned to CPUs %s", name, pin.cpus)
		}
		t.Logf("worker %s: node %s, address %s, pinned to CPU %s by its node's agent", name, pod.Spec.NodeName, pod.Status.PodIP, pin.cpus)
	}
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), v1alpha1.HostfileName("spread"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(cm.Data["hostfile"]), "\n"); len(lines) != multiNodes {
		t.Errorf("hostfile names %d workers, want %d:\n%s", len(lines), multiNodes, cm.Data["hostfile"])
	}
}

// A least-loaded job goes to the node whose CPU is least requested, a most-loaded one to the
// most requested that still fits it; the loads are set by pods requesting shared CPU on two nodes.
func TestMultiNodePlacementPolicies(t *testing.T) {
	c := deployNodes(t)
	ns := c.Namespace(t)
	names := c.NodeNames()
	createPod(t, c, ns, fillerPod("load-300m", names[1], "300m"))
	createPod(t, c, ns, fillerPod("load-600m", names[2], "600m"))
	for _, p := range []string{"load-300m", "load-600m"} {
		c.WaitForPod(t, ns, p, "running", framework.PodStartTimeout, framework.Running)
	}
	for _, policy := range []v1alpha1.PlacementPolicy{v1alpha1.LeastLoaded, v1alpha1.MostLoaded} {
		loads, err := cpuLoads(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.MinFunc(names, func(a, b string) int { return cmpLoad(loads[a], loads[b]) })
		if policy == v1alpha1.MostLoaded {
			want = slices.MaxFunc(names, func(a, b string) int { return cmpLoad(loads[a], loads[b]) })
		}
		t.Logf("requested CPU fractions %v: %s predicts node %s", loads, policy, want)
		name := string(policy)
		job := podNetworkJob(name, 1)
		job.Spec.Placement = policy
		createJob(t, c, ns, job)
		running := waitPhase(t, c, ns, name, v1alpha1.PhaseRunning, placerTimeout)
		if got := running.Status.Placements[0].Node; got != want {
			t.Errorf("the %s job's worker is on node %s, want %s (loads %v)", policy, got, want, loads)
		}
		deleteJob(t, c, ns, name)
		noPinsOn(t, c, ns, names...)
	}
}

func cmpLoad(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// deleteJob deletes a job and waits until its pods are gone.
func deleteJob(t *testing.T, c *framework.Cluster, ns, name string) {
	t.Helper()
	policy := metav1.DeletePropagationForeground
	if err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(context.Background(), name,
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("delete HPCJob %s/%s: %v", ns, name, err)
	}
	framework.Eventually(t, "the pods of job "+name+" to be gone", framework.PodDeleteTimeout, func(ctx context.Context) error {
		return noJobPods(ctx, c, ns, name)
	})
}

func noJobPods(ctx context.Context, c *framework.Cluster, ns, job string) error {
	bound, pending, err := jobPods(ctx, c, ns, job)
	if err != nil {
		return err
	}
	if n := len(bound) + len(pending); n > 0 {
		return fmt.Errorf("%d pods of job %s left", n, job)
	}
	return nil
}

// An exclusive-nodes job keeps another HPC job off its node although that node has room for it,
// and the other way round: a gang of shared-pool pods (an HPC job to the placer) tied to the
// exclusive job's node waits until that job is gone, then an exclusive job tied to the node
// waits until the gang is gone.
func TestMultiNodeExclusiveNodesKeepOtherJobsOff(t *testing.T) {
	c := deployNodes(t)
	ns := c.Namespace(t)
	excl := podNetworkJob("exclusive", 1)
	excl.Spec.ExclusiveNodes = true
	createJob(t, c, ns, excl)
	node := waitPhase(t, c, ns, "exclusive", v1alpha1.PhaseRunning, placerTimeout).Status.Placements[0].Node

	for i := range 2 {
		ctr := framework.Container("rank", framework.WorkerImage)
		ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
		pod := framework.Pod(fmt.Sprintf("gang-%d", i), ctr)
		pod.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		pod.Labels = map[string]string{v1alpha1.LabelPodGroup: "gang", v1alpha1.LabelPodGroupMinAvailable: "2"}
		createPod(t, c, ns, pod)
	}
	framework.Eventually(t, "an event saying the gang waits for the exclusive job's node", placerTimeout, func(ctx context.Context) error {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + controller.ReasonUnschedulable})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "exclusive") {
				t.Logf("event: %s", e.Message)
				return nil
			}
		}
		return fmt.Errorf("%d %s events, none about exclusive nodes", len(evs.Items), controller.ReasonUnschedulable)
	})
	framework.Consistently(t, "no pod of the gang bound while the exclusive job holds node "+node, 5*time.Second, func(ctx context.Context) error {
		return gangBound(ctx, c, ns, "", 0)
	})
	deleteJob(t, c, ns, "exclusive")
	framework.Eventually(t, "the gang bound to node "+node+" once the exclusive job is gone", placerTimeout, func(ctx context.Context) error {
		return gangBound(ctx, c, ns, node, 2)
	})

	later := podNetworkJob("later", 1)
	later.Spec.ExclusiveNodes = true
	later.Spec.Worker.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	createJob(t, c, ns, later)
	framework.Eventually(t, "the exclusive job tied to node "+node+" to wait for the gang there", placerTimeout, func(ctx context.Context) error {
		j, err := getJob(ctx, c, ns, "later")
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(j.Status.Conditions, controller.ConditionScheduled)
		if j.Status.Phase != v1alpha1.PhasePending || cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "exclusive") {
			return fmt.Errorf("phase %q, Scheduled condition %+v", j.Status.Phase, cond)
		}
		return nil
	})
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: v1alpha1.LabelPodGroup + "=gang"}); err != nil {
		t.Fatal(err)
	}
	running := waitPhase(t, c, ns, "later", v1alpha1.PhaseRunning, placerTimeout)
	if got := running.Status.Placements[0].Node; got != node {
		t.Errorf("the exclusive job tied to node %s runs on %s", node, got)
	}
}

// gangBound checks that want pods of the gang are bound, all to node.
func gangBound(ctx context.Context, c *framework.Cluster, ns, node string, want int) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelPodGroup + "=gang"})
	if err != nil {
		return err
	}
	bound := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		if p.Spec.NodeName != node {
			return fmt.Errorf("pod %s of the gang is bound to node %s", p.Name, p.Spec.NodeName)
		}
		bound++
	}
	if bound != want {
		return fmt.Errorf("%d pods of the gang bound, want %d", bound, want)
	}
	return nil
}

// A real Open MPI job with a worker on each of two nodes runs HPCC: its ranks start over SSH in
// workers on the pod network, their traffic (G-RandomRing among it) crosses the nodes, and every
// rank's CPU affinity is exactly its worker's pin on its node.
func TestMultiNodeOpenMPIRunsHPCCAcrossNodes(t *testing.T) {
	hpccAcrossNodes(t, "ring", v1alpha1.OpenMPI)
}

// MPICH's Hydra proxies on the workers call the launcher back by its host name, which resolves
// through the job's Service on a pod network.
func TestMultiNodeMPICHRunsHPCCAcrossNodes(t *testing.T) {
	hpccAcrossNodes(t, "ring-mpich", v1alpha1.MPICH)
}

// hpccAcrossNodes runs HPCC with impl on two one-task workers of two nodes: every rank on its
// worker's pin, HPCC's ring measured across the nodes.
func hpccAcrossNodes(t *testing.T, name string, impl v1alpha1.MPIImplementation) {
	c, ns, running, workers := startMPIOnTwoNodes(t, name, hpccCommand(name), func(j *v1alpha1.HPCJob) { j.Spec.MPIImplementation = impl })
	ranks := watchRanksAcrossNodes(t, c, ns, name, workers)
	done := waitPhase(t, c, ns, name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, w := range running.Status.Placements {
		if ranks[w.Worker] == 0 {
			t.Errorf("saw no hpcc rank in worker %s on node %s while the job ran", w.Worker, w.Node)
		}
	}
	log := launcherLog(t, c, ns, name)
	runs, err := hpcc.Parse(strings.NewReader(log))
	if err != nil {
		t.Fatalf("HPCC's result is not in the launcher's log: %v\n%s", err, log)
	}
	h, err := runs[len(runs)-1].Headline()
	if err != nil || !h.Success {
		t.Fatalf("HPCC did not succeed (Success=%v, %v):\n%s", h.Success, err, log)
	}
	if !h.GRandomRing.Measured || h.GRandomRing.Value <= 0 {
		t.Errorf("G-RandomRing was not measured across the nodes: %+v", h.GRandomRing)
	}
	for _, f := range h.Figures() {
		t.Logf("%s (%s): %v %s measured=%v", f.Benchmark, f.Key, f.Value, f.Unit, f.Measured)
	}
	if done.Status.Restarts != 0 {
		t.Errorf("the launcher was retried %d times", done.Status.Restarts)
	}
	noPinsOn(t, c, ns, c.NodeNames()...)
}

// startMPIOnTwoNodes deploys finegrain and runs an MPI job (Open MPI unless edit says otherwise)
// of two one-task workers on the pod network whose launcher runs command, edited by edit when given; it returns the job once it
// runs with a worker on each of two nodes, and the workers.
func startMPIOnTwoNodes(t *testing.T, name, command string, edit func(*v1alpha1.HPCJob)) (*framework.Cluster, string, *v1alpha1.HPCJob, map[string]*corev1.Pod) {
	t.Helper()
	const tasks = 2
	c := deployNodes(t)
	ns := c.Namespace(t)
	createHPCCInput(t, c, ns, name, tasks)
	job := podNetworkMPIJob(name, tasks, command)
	if edit != nil {
		edit(job)
	}
	createJob(t, c, ns, job)
	c.DumpOnFailure(t, ns)
	running := waitPhase(t, c, ns, name, v1alpha1.PhaseRunning, placerTimeout)
	if n := len(running.Status.Placements); n != tasks || running.Status.Placements[0].Node == running.Status.Placements[1].Node {
		t.Fatalf("placements %+v: want %d workers on %d nodes", running.Status.Placements, tasks, tasks)
	}
	return c, ns, running, workerPods(t, c, ns, running)
}

// watchRanksAcrossNodes polls the workers' cpuset cgroups, on their nodes, until the job ends,
// checking that every hpcc rank in a worker may run on exactly the CPUs of the worker's pin and
// use the memory of the pin's NUMA node only; it returns how many ranks it saw per worker.
func watchRanksAcrossNodes(t *testing.T, c *framework.Cluster, ns, name string, workers map[string]*corev1.Pod) map[string]int {
	t.Helper()
	seen, checked := map[string]int{}, map[int]bool{}
	pins := map[string]nodePin{}
	for w, pod := range workers {
		pins[w] = pinOf(t, c, pod, "worker")
	}
	deadline := time.Now().Add(mpiTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		job, err := getJob(ctx, c, ns, name)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if p := job.Status.Phase; p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed {
			return seen
		}
		for w, pod := range workers {
			dir, err := c.CgroupDir(pod, "worker", "cpuset")
			if err != nil {
				t.Fatal(err)
			}
			ranks, err := ranksIn(dir, "hpcc")
			if err != nil {
				continue // the worker's cgroup went: the job is ending
			}
			for _, r := range ranks {
				if checked[r.pid] {
					continue
				}
				checked[r.pid] = true
				seen[w]++
				pin := pins[w]
				if allowed, err := cpuset.Parse(r.cpus); err != nil || !allowed.Equals(pin.cpus) {
					t.Errorf("rank %d of worker %s on node %s may run on CPUs %q, not exactly the worker's pin %s", r.pid, w, pod.Spec.NodeName, r.cpus, pin.cpus)
				}
				if r.mems != fmt.Sprint(pin.numa) {
					t.Errorf("rank %d of worker %s may use memory of NUMA nodes %q, not only the pin's %d", r.pid, w, r.mems, pin.numa)
				}
				if r.cgroup == "" || !strings.HasSuffix(dir, r.cgroup) {
					t.Errorf("rank %d is in cgroup %q, not in its worker's container cgroup %s", r.pid, r.cgroup, dir)
				}
				t.Logf("rank pid %d in worker %s on node %s: Cpus_allowed_list %s = pin %s, Mems_allowed_list %s, cgroup %s",
					r.pid, w, pod.Spec.NodeName, r.cpus, pin.cpus, r.mems, r.cgroup)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("HPCJob %s/%s did not end within %v", ns, name, mpiTimeout)
	return nil
}

// Killing the kubelet of one worker's node fails the running job cleanly: once the node is
// unreachable the worker is evicted (its template tolerates that for no time), the job fails
// naming that worker and node, the launcher and the other worker go and their node's pins
// return, and nothing is placed again. With the kubelet back, the lost worker goes too.
func TestMultiNodeKubeletLossFailsTheJob(t *testing.T) {
	const name = "lost"
	c, ns, running, workers := startMPIOnTwoNodes(t, name, "mpirun sleep 600", func(job *v1alpha1.HPCJob) {
		for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
			job.Spec.Worker.Spec.Tolerations = append(job.Spec.Worker.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0)})
		}
	})
	framework.Eventually(t, "a rank (sleep) in every worker", mpiTimeout, func(ctx context.Context) error {
		for w, pod := range workers {
			dir, err := c.CgroupDir(pod, "worker", "cpuset")
			if err != nil {
				return err
			}
			if ranks, err := ranksIn(dir, "sleep"); err != nil || len(ranks) == 0 {
				return fmt.Errorf("no rank in worker %s yet (%v)", w, err)
			}
		}
		return nil
	})
	launcher, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), v1alpha1.LauncherName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The lost node runs a worker and not the launcher, whose mpirun then outlives it.
	victim := running.Status.Placements[0]
	if victim.Node == launcher.Spec.NodeName {
		victim = running.Status.Placements[1]
	}
	t.Logf("killing the kubelet of node %s, which runs worker %s; the launcher runs on %s", victim.Node, victim.Worker, launcher.Spec.NodeName)
	c.KillKubelet(t, victim.Node)

	msg := failedWith(t, c, ns, name, controller.ReasonWorkerFailed, 3*time.Minute)
	t.Logf("the job failed: %s", msg)
	if !strings.Contains(msg, victim.Worker) || !strings.Contains(msg, victim.Node) {
		t.Errorf("the Finished condition %q does not name worker %s and node %s", msg, victim.Worker, victim.Node)
	}
	live := slices.DeleteFunc(c.NodeNames(), func(n string) bool { return n == victim.Node })
	noPinsOn(t, c, ns, live...)
	framework.Eventually(t, "every pod of the job gone but the lost worker", time.Minute, func(ctx context.Context) error {
		bound, pending, err := jobPods(ctx, c, ns, name)
		if err != nil {
			return err
		}
		for _, p := range append(bound, pending...) {
			if p.Name != victim.Worker {
				return fmt.Errorf("pod %s is still there (%s on node %q)", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
		}
		return nil
	})
	final, err := getJob(context.Background(), c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status.Phase != v1alpha1.PhaseFailed || final.Status.Restarts != 0 {
		t.Errorf("after the node loss the job is %s with %d restarts, want Failed with none", final.Status.Phase, final.Status.Restarts)
	}

	c.StartStoppedKubelets(t)
	framework.Eventually(t, "the lost worker "+victim.Worker+" gone once node "+victim.Node+"'s kubelet is back", 2*time.Minute, func(ctx context.Context) error {
		return noJobPods(ctx, c, ns, name)
	})
	noPinsOn(t, c, ns, c.NodeNames()...)
}
