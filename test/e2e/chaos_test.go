//go:build e2e

// Issue 21's chaos test: large gangs bound on kwok nodes (as make bench-placer-scale makes them)
// while the placer is killed with SIGKILL in the middle of a binding, and while the API server is
// killed and started again in the middle of one. A gang the strike interrupts is rolled back and
// placed again; within the gangs' timeout every gang is whole (every worker bound where the job's
// status says, on the NUMA node it says, and no other pod of the job left), and at no time does a
// NUMA node hold more pinned CPUs than it has. The gangs of a round need every pinnable CPU of
// the fake nodes, so a CPU the strike lost (held for a pod that is gone, or a worker of a
// half-made gang left behind) leaves a gang that can never be whole. Run it three times in a row:
//
//	go test -tags e2e -count=3 -run TestChaos ./test/e2e/
package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// The chaos cluster: fake nodes of two NUMA nodes of 8 CPUs, and rounds of gangs of 1-CPU
// workers that take every CPU of them but the shared pool's one per node.
const (
	chaosNodes, chaosNUMA, chaosCPUs = 16, 2, 8
	chaosGangs                       = 3
	chaosWorkers                     = chaosNodes * (chaosNUMA*chaosCPUs - 1) / chaosGangs
	chaosTimeout                     = 120 * time.Second
)

// chaosJob is a gang of workers 1-CPU workers on the fake nodes, its launcher made with them.
func chaosJob(name string, workers int) *v1alpha1.HPCJob {
	pod := func(ctr string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{chaosLabel: chaosValue},
			Tolerations:                   []corev1.Toleration{kwokToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{framework.Container(ctr, framework.WorkerImage)},
		}}
	}
	return &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.HPCJobSpec{
			Tasks: int32(workers), Workers: int32(workers), Granularity: v1alpha1.GranularityNone, Profile: v1alpha1.ProfileCPU,
			LauncherCreationPolicy: v1alpha1.AtStartup,
			TaskResources:          v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
			Gang:                   v1alpha1.GangPolicy{TimeoutSeconds: int32(chaosTimeout / time.Second)},
			Launcher:               pod("mpirun"),
			Worker:                 pod("worker"),
		},
	}
}

func TestChaosPlacerAndAPIServerMidBind(t *testing.T) {
	c := framework.Setup(t)
	// The fake nodes owe nothing to the kubelet's policy, runtime or node count: one pass of
	// make e2e runs it.
	c.RequireCPUManagerPolicy(t, "none")
	if len(c.Nodes) != 1 || c.Env["CONTAINERD"] == "2" {
		t.Skip("runs in make e2e's pass of one node on containerd 1 (policy none); the fake nodes owe nothing to the others")
	}
	kwokBin := kwokBinary(t)
	ctx := context.Background()
	// The placer under test runs on the host; no other may place HPCJobs meanwhile.
	removeFinegrain(t, c)
	// Every API the placer watches: it places nothing until its informers have synced.
	if out, err := c.Kubectl(ctx, "apply", "-f", c.RepoPath("daemonset/crds/"), "-f", c.RepoPath("daemonset/placer/crd-hpcjob.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dir := t.TempDir()
	bin := buildPlacer(t, c, dir)
	addFakeNodes(t, c, chaosNodes, chaosNUMA, chaosCPUs)
	kwok := startKwok(t, c, dir, kwokBin)
	t.Cleanup(kwok.stop)
	framework.Eventually(t, "the fake nodes Ready", 2*time.Minute, func(ctx context.Context) error {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: chaosLabel + "=" + chaosValue})
		if err != nil {
			return err
		}
		ready := 0
		for i := range nodes.Items {
			if framework.NodeReady(&nodes.Items[i]) {
				ready++
			}
		}
		if ready < chaosNodes {
			return fmt.Errorf("%d of %d Ready", ready, chaosNodes)
		}
		return nil
	})
	// The placer's writes are paced (40/s; the Deployment allows more) so that a round's bindings
	// take seconds: a strike on the first pod seen then lands among them although the API server,
	// short of CPU on a small machine, reports that pod late.
	placerArgs := []string{"run", "--kubeconfig", placerKubeconfig(t, c, dir), "--leader-elect=false", "--metrics-address=", "--log-level=info",
		"--kube-api-qps=40", "--kube-api-burst=20"}
	placer := startProcess(t, c, dir, "placer", bin, placerArgs...)
	// Who else deletes pods: the garbage collector, the pod and node lifecycle controllers.
	c.OnFailure(t, "kube-controller-manager log (end)", func(_ context.Context, w io.Writer) error {
		return tail(w, filepath.Join(c.LogDir, "kube-controller-manager.log"), 16<<10)
	})
	t.Cleanup(func() { placer.stop() })
	ns := c.Namespace(t)

	// Round 1: the placer is killed once a gang's first pod exists, and started again.
	names := chaosRound(t, c, ns, "kill", func() {
		placer.kill(t)
		time.Sleep(2 * time.Second)
		placer = startProcess(t, c, dir, "placer", bin, placerArgs...)
	})
	awaitWhole(t, c, ns, names, chaosTimeout)
	deleteJobs(t, c, ns, names)

	// Round 2: the API server is killed once a gang's first pod exists, and started again.
	var down time.Duration
	names = chaosRound(t, c, ns, "apiserver", func() { down = c.RestartAPIServer(t) })
	t.Logf("the API server was back %s after it was killed", down.Round(time.Millisecond))
	awaitWhole(t, c, ns, names, chaosTimeout+down)
	select {
	case <-placer.done:
		t.Errorf("the placer exited during the API server's restart: %v", placer.err)
	default:
	}
	deleteJobs(t, c, ns, names)
}

// chaosRound creates the round's gangs and calls strike as soon as the first of their pods
// exists: in the middle of a binding. It returns the gangs' names.
func chaosRound(t *testing.T, c *framework.Cluster, ns, round string, strike func()) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var names []string
	for g := range chaosGangs {
		name := fmt.Sprintf("%s-%d", round, g)
		names = append(names, name)
		createJob(t, c, ns, chaosJob(name, chaosWorkers))
	}
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			p := ev.Object.(*corev1.Pod)
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob})
			if err != nil {
				t.Fatal(err)
			}
			made, all := len(pods.Items), chaosGangs*(chaosWorkers+1)
			t.Logf("round %s: first pod %s seen, %d of the gangs' %d pods made; striking", round, p.Name, made, all)
			if made == all {
				t.Errorf("round %s: every pod of the gangs was made before the strike, which did not land in the middle of a binding", round)
			}
			strike()
			return names
		}
	}
	t.Fatalf("round %s: no pod of the gangs appeared within a minute", round)
	return nil
}

// awaitWhole waits until every gang is whole and stays so; at every look, no NUMA node may hold
// more pinned CPUs than it has.
func awaitWhole(t *testing.T, c *framework.Cluster, ns string, names []string, timeout time.Duration) {
	t.Helper()
	took := framework.Eventually(t, "every gang whole", timeout, func(ctx context.Context) error {
		return checkGangs(ctx, c, ns, names)
	})
	t.Logf("every gang whole %s after the strike", took.Round(time.Millisecond))
	// And it stays so: nothing is bound twice, lost or left behind afterwards.
	framework.Consistently(t, "every gang stays whole", 5*time.Second, func(ctx context.Context) error {
		return checkGangs(ctx, c, ns, names)
	})
}

// checkGangs checks the gangs: each is Running and whole (each placement a live worker pod of
// the job, bound to that node with that NUMA node, and no other worker of it). Across the fake
// nodes, no NUMA node may hold more pinned CPUs than it has, nor a node more than all but its
// shared-pool CPU: that, or a gang that ended, fails at once.
func checkGangs(ctx context.Context, c *framework.Cluster, ns string, names []string) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelRole + "=" + v1alpha1.RoleWorker})
	if err != nil {
		return err
	}
	byJob := map[string]map[string]*corev1.Pod{}
	perZone, perNode := map[string]int{}, map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		job := p.Labels[v1alpha1.LabelJob]
		if byJob[job] == nil {
			byJob[job] = map[string]*corev1.Pod{}
		}
		byJob[job][p.Name] = p
		if p.Spec.NodeName == "" {
			continue
		}
		numa, err := strconv.Atoi(p.Annotations[v1alpha1.AnnotationNUMANode])
		if err != nil {
			return fmt.Errorf("worker %s bound to %s has no NUMA node annotation (%q)", p.Name, p.Spec.NodeName, p.Annotations[v1alpha1.AnnotationNUMANode])
		}
		cpus, _ := snapshot.PinnedDemand(p)
		perZone[fmt.Sprintf("%s/%d", p.Spec.NodeName, numa)] += cpus
		perNode[p.Spec.NodeName] += cpus
	}
	for zone, n := range perZone {
		if n > chaosCPUs {
			return framework.Permanent(fmt.Errorf("NUMA node %s holds %d pinned CPUs of %d: doubly assigned", zone, n, chaosCPUs))
		}
	}
	for node, n := range perNode {
		if n > chaosNUMA*chaosCPUs-1 {
			return framework.Permanent(fmt.Errorf("node %s holds %d pinned CPUs, more than its %d less the shared pool's one", node, n, chaosNUMA*chaosCPUs))
		}
	}
	for _, name := range names {
		job, err := getJob(ctx, c, ns, name)
		if err != nil {
			return err
		}
		workers := byJob[name]
		switch job.Status.Phase {
		case v1alpha1.PhaseRunning:
			if err := whole(job, workers); err != nil {
				return err
			}
		case "", v1alpha1.PhasePending:
			return fmt.Errorf("gang %s is %q with %d workers", name, job.Status.Phase, len(workers))
		default:
			return framework.Permanent(fmt.Errorf("gang %s ended %s: %+v", name, job.Status.Phase, job.Status.Conditions))
		}
	}
	return nil
}

// whole checks a Running job against its live worker pods.
func whole(job *v1alpha1.HPCJob, workers map[string]*corev1.Pod) error {
	pl := job.Status.Placements
	if len(pl) != int(job.Spec.Workers) || len(workers) != len(pl) {
		return fmt.Errorf("gang %s is Running with %d placements and %d live workers, want %d of each", job.Name, len(pl), len(workers), job.Spec.Workers)
	}
	for _, p := range pl {
		w := workers[p.Worker]
		switch {
		case w == nil:
			return fmt.Errorf("gang %s: worker %s is placed on %s but has no pod", job.Name, p.Worker, p.Node)
		case w.Spec.NodeName != p.Node || w.Annotations[v1alpha1.AnnotationNUMANode] != strconv.Itoa(int(p.NUMANode)):
			return fmt.Errorf("gang %s: worker %s is placed on %s NUMA %d but bound to %s NUMA %s", job.Name, p.Worker, p.Node, p.NUMANode,
				w.Spec.NodeName, w.Annotations[v1alpha1.AnnotationNUMANode])
		case metav1.GetControllerOf(w) == nil || metav1.GetControllerOf(w).UID != job.UID:
			return fmt.Errorf("gang %s: worker %s is not the job's", job.Name, p.Worker)
		}
	}
	return nil
}

// deleteJobs deletes the gangs and waits until their pods are gone.
func deleteJobs(t *testing.T, c *framework.Cluster, ns string, names []string) {
	t.Helper()
	jobs := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	policy := metav1.DeletePropagationBackground
	for _, name := range names {
		if err := jobs.Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatalf("delete HPCJob %s/%s: %v", ns, name, err)
		}
	}
	framework.Eventually(t, "the gangs' pods gone", 2*time.Minute, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
}
