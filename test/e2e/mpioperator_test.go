//go:build e2e

// MPI Operator users switch with one line: the real MPI Operator (v0.7.0, built by
// hack/mpi-operator/build.sh) runs beside finegrain with --gang-scheduling=finegrain-placer, and
// an MPIJob v2beta1 on the MPI image, whose workers carry the pinning label, is bound by the
// placer as one gang (the PodGroup the operator writes), its workers pinned by the agents of
// their nodes, its ranks run inside the workers on the pinned CPUs, and it succeeds: once with
// Open MPI, once with MPICH (mpiImplementation), under the same operator.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// mpiOperatorEnv names the directory hack/mpi-operator/build.sh prints: the mpi-operator binary
// and the MPIJob CRD of its release.
const mpiOperatorEnv = "FINEGRAIN_MPI_OPERATOR"

var mpiJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

// mpiOperatorDir returns the directory $FINEGRAIN_MPI_OPERATOR names; it skips the test when
// there is none.
func mpiOperatorDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(mpiOperatorEnv)
	if dir == "" {
		t.Skipf("%s is not set: build MPI Operator with hack/mpi-operator/build.sh and set %s to the directory it prints (make e2e does both)", mpiOperatorEnv, mpiOperatorEnv)
	}
	for _, f := range []string{"mpi-operator", "mpijobs-crd.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Skipf("%s=%s has no %s (%v): run hack/mpi-operator/build.sh", mpiOperatorEnv, dir, f, err)
		}
	}
	return dir
}

// startMPIOperator installs the MPIJob CRD and runs MPI Operator with finegrain's placer as its
// gang scheduler, watching namespace ns only (its leader-election lease there too), until the
// test ends. Its log goes to the test's output when the test fails.
func startMPIOperator(t *testing.T, c *framework.Cluster, dir, ns string) {
	t.Helper()
	ctx := context.Background()
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(dir, "mpijobs-crd.yaml")); err != nil {
		t.Fatalf("install the MPIJob CRD: %v\n%s", err, out)
	}
	// The operator exits at once when the CRD does not serve yet.
	framework.Eventually(t, "the MPIJob CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(mpiJobs).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	logPath := filepath.Join(t.TempDir(), "mpi-operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "mpi-operator"), "--gang-scheduling="+v1alpha1.DefaultSchedulerName,
		"--namespace="+ns, "--lock-namespace="+ns, "--kube-api-qps=50", "--kube-api-burst=100")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start MPI Operator: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			t.Logf("MPI Operator's log (last 40 lines of %s):\n%s", logPath, lastLines(logPath, 40))
		}
	})
}

// operatorMPIJob is an MPIJob of two one-CPU workers on the MPI image whose launcher runs one
// rank per worker with the MPI impl (MPI Operator's mpiImplementation: OpenMPI or MPICH); each
// rank says where it runs and on which CPUs, then sleeps so that the test sees it in its worker's
// cgroup. The launcher's command is the same plain mpirun for both MPIs. The workers carry
// finegrain's pinning label; the placer is not named anywhere: the operator's gang option sets
// every pod's schedulerName.
func operatorMPIJob(name, impl string) *unstructured.Unstructured {
	res := map[string]any{"cpu": "1", "memory": "256Mi"}
	rank := `echo "rank ${OMPI_COMM_WORLD_RANK:-$PMI_RANK} on $(hostname): $(grep Cpus_allowed_list /proc/self/status)"; sleep 10`
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mpiJobs.Group + "/" + mpiJobs.Version, "kind": "MPIJob",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"mpiImplementation": impl,
			"slotsPerWorker":    int64(1),
			"runPolicy":         map[string]any{"cleanPodPolicy": "Running"},
			"mpiReplicaSpecs": map[string]any{
				"Launcher": map[string]any{
					"replicas": int64(1),
					"template": map[string]any{"spec": map[string]any{
						"terminationGracePeriodSeconds": int64(1),
						"containers": []any{map[string]any{
							"name": "launcher", "image": framework.MPIImage, "imagePullPolicy": "Never",
							"args":      []any{"mpirun", "sh", "-c", rank},
							"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}},
						}},
					}},
				},
				"Worker": map[string]any{
					"replicas": int64(2),
					"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{v1alpha1.LabelPinning: v1alpha1.PinningExclusive}},
						"spec": map[string]any{
							"terminationGracePeriodSeconds": int64(1),
							"containers": []any{map[string]any{
								"name": "worker", "image": framework.MPIImage, "imagePullPolicy": "Never",
								"command":   []any{"/usr/local/bin/mpi-entrypoint"},
								"resources": map[string]any{"requests": res, "limits": res},
							}},
						},
					},
				},
			},
		},
	}}
}

func TestMultiNodeMPIOperatorJob(t *testing.T) {
	dir := mpiOperatorDir(t)
	c := deployNodes(t)
	ns := c.Namespace(t)
	startMPIOperator(t, c, dir, ns)
	c.DumpOnFailure(t, ns)
	// One job after the other on the same nodes: each needs one exclusive CPU of two nodes, and
	// the first one's pins are gone when it ends.
	for _, tc := range []struct{ impl, job string }{{"OpenMPI", "pi"}, {"MPICH", "pi-mpich"}} {
		if !t.Run(tc.impl, func(t *testing.T) { runOperatorMPIJob(t, c, ns, tc.job, tc.impl) }) {
			return
		}
	}
}

// runOperatorMPIJob runs operatorMPIJob(name, impl) in namespace ns, where MPI Operator runs, and
// checks that it is one gang, its workers pinned, its ranks on the pins, and that it succeeds.
func runOperatorMPIJob(t *testing.T, c *framework.Cluster, ns, name, impl string) {
	if _, err := c.Dynamic.Resource(mpiJobs).Namespace(ns).Create(context.Background(), operatorMPIJob(name, impl), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MPIJob %s/%s: %v", ns, name, err)
	}

	// 1. One gang: the PodGroup MPI Operator wrote (workers and launcher, no timeout of its own)
	//    reaches Running with all three pods, each bound by the placer.
	framework.Eventually(t, "PodGroup "+name+" of minMember 3 Running with its 3 pods", placerTimeout, func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(schedv1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pg, err := schedv1alpha1.FromUnstructured(u)
		if err != nil {
			return framework.Permanent(err)
		}
		if pg.Spec.MinMember != 3 {
			return framework.Permanent(fmt.Errorf("PodGroup %s has minMember %d, want 3 (2 workers and the launcher)", name, pg.Spec.MinMember))
		}
		if s := pg.Status; s.Phase != schedv1alpha1.PhaseRunning || s.Running != 3 {
			return fmt.Errorf("PodGroup %s status %+v", name, s)
		}
		return nil
	})
	pods, launcher := operatorPods(t, c, ns, name)
	workers := map[string]*corev1.Pod{}
	for _, p := range pods {
		if p.Labels[schedv1alpha1.LabelPodGroup] != name || p.Spec.SchedulerName != v1alpha1.DefaultSchedulerName {
			t.Errorf("pod %s: label %s=%q, schedulerName %q; want %q and %q (set by MPI Operator's gang option)", p.Name,
				schedv1alpha1.LabelPodGroup, p.Labels[schedv1alpha1.LabelPodGroup], p.Spec.SchedulerName, name, v1alpha1.DefaultSchedulerName)
		}
		if p != launcher {
			workers[p.Name] = p
		}
	}
	bindings := scheduledBy(t, c, ns, pods)
	var first, last time.Time
	for _, at := range bindings {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	// The launcher's Job makes its pod after the workers: a worker bound before the launcher
	// existed would be half a gang.
	if created := launcher.CreationTimestamp.Time; first.Before(created) {
		t.Errorf("a pod was bound at %s, before the launcher %s was created at %s", first.Format(time.RFC3339Nano), launcher.Name, created.Format(time.RFC3339))
	}
	if spread := last.Sub(first); spread > 2*time.Second {
		t.Errorf("the gang's bindings are %v apart, not one binding of the three", spread)
	}

	// 2. Each worker pinned by its node's agent on the NUMA node the placer chose, on a node of
	//    its own (one CPU of each node can be exclusive); the launcher in the shared pool.
	pins := map[string]nodePin{}
	nodes := map[string]string{}
	for w, pod := range workers {
		pin := pinOf(t, c, pod, "worker")
		pins[w] = pin
		if got := pod.Annotations[v1alpha1.AnnotationNUMANode]; got != fmt.Sprint(pin.numa) {
			t.Errorf("worker %s: the placer chose NUMA node %q, the agent pinned on %d", w, got, pin.numa)
		}
		if other, ok := nodes[pod.Spec.NodeName]; ok {
			t.Errorf("workers %s and %s both on node %s", other, w, pod.Spec.NodeName)
		}
		nodes[pod.Spec.NodeName] = w
	}
	if lp, err := nodePins(context.Background(), c, launcher.Spec.NodeName); err != nil {
		t.Fatal(err)
	} else if p, ok := lp[ns+"/"+launcher.Name+"/launcher"]; ok {
		t.Errorf("launcher %s pinned to CPUs %s; it belongs in the shared pool", launcher.Name, p.cpus)
	}

	// 3. The ranks run inside the workers, on exactly the pinned CPUs and their NUMA node's memory.
	seen := map[string]bool{}
	framework.Eventually(t, "a rank in each worker's cgroup", time.Minute, func(context.Context) error {
		for w, pod := range workers {
			if seen[w] {
				continue
			}
			cg, err := c.CgroupDir(pod, "worker", "cpuset")
			if err != nil {
				return framework.Permanent(err)
			}
			ranks, err := ranksIn(cg, "sleep")
			if err != nil || len(ranks) == 0 {
				return fmt.Errorf("no rank in worker %s yet (%v)", w, err)
			}
			for _, r := range ranks {
				if allowed, err := cpuset.Parse(r.cpus); err != nil || !allowed.Equals(pins[w].cpus) {
					t.Errorf("rank pid %d of worker %s on node %s may run on CPUs %q, not exactly the worker's pin %s", r.pid, w, pod.Spec.NodeName, r.cpus, pins[w].cpus)
				}
				if r.mems != fmt.Sprint(pins[w].numa) {
					t.Errorf("rank pid %d of worker %s may use memory of NUMA nodes %q, not only the pin's %d", r.pid, w, r.mems, pins[w].numa)
				}
				t.Logf("rank pid %d in worker %s on node %s: Cpus_allowed_list %s = pin %s, Mems_allowed_list %s", r.pid, w, pod.Spec.NodeName, r.cpus, pins[w].cpus, r.mems)
			}
			seen[w] = true
		}
		return nil
	})

	// 4. The MPIJob succeeds; its launcher's log has a rank from each worker; the pins go.
	framework.Eventually(t, "MPIJob "+name+" Succeeded", time.Minute, func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(mpiJobs).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["status"] != "True" {
				continue
			}
			switch m["type"] {
			case "Succeeded":
				return nil
			case "Failed":
				return framework.Permanent(fmt.Errorf("MPIJob %s failed: %v", name, m["message"]))
			}
		}
		return fmt.Errorf("MPIJob %s conditions %v", name, conds)
	})
	log, err := c.PodLogs(context.Background(), ns, launcher.Name, "launcher")
	if err != nil {
		t.Fatal(err)
	}
	for w := range workers {
		if !strings.Contains(log, " on "+w+": Cpus_allowed_list:") {
			t.Errorf("no rank of worker %s in the launcher's log:\n%s", w, log)
		}
	}
	if p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), launcher.Name, metav1.GetOptions{}); err == nil {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("the launcher restarted %d times:\n%s", s.RestartCount, log)
			}
		}
	}
	noPinsOn(t, c, ns, c.NodeNames()...)
}

// operatorPods returns the MPIJob's pods once all three are bound, and which is the launcher.
func operatorPods(t *testing.T, c *framework.Cluster, ns, job string) ([]*corev1.Pod, *corev1.Pod) {
	t.Helper()
	var pods []*corev1.Pod
	var launcher *corev1.Pod
	framework.Eventually(t, "the launcher and 2 workers of MPIJob "+job+" bound", placerTimeout, func(ctx context.Context) error {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=" + job})
		if err != nil {
			return err
		}
		pods, launcher = nil, nil
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound yet", p.Name)
			}
			pods = append(pods, p)
			if p.Labels["training.kubeflow.org/job-role"] == "launcher" {
				launcher = p
			}
		}
		if len(pods) != 3 || launcher == nil {
			return fmt.Errorf("%d pods of MPIJob %s bound, launcher %v", len(pods), job, launcher != nil)
		}
		return nil
	})
	return pods, launcher
}

// scheduledBy returns when the placer bound each pod, from its Scheduled event; a pod bound by
// any other scheduler fails the test.
func scheduledBy(t *testing.T, c *framework.Cluster, ns string, pods []*corev1.Pod) map[string]time.Time {
	t.Helper()
	at := map[string]time.Time{}
	for _, p := range pods {
		eventFor(t, c, ns, p.Name, controller.ReasonScheduled)
		evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + controller.ReasonScheduled + ",involvedObject.name=" + p.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			by := e.ReportingController
			if by == "" {
				by = e.Source.Component
			}
			if by != v1alpha1.DefaultSchedulerName {
				t.Errorf("pod %s was bound by %q: %s", p.Name, by, e.Message)
				continue
			}
			when := e.EventTime.Time
			if when.IsZero() {
				when = e.FirstTimestamp.Time
			}
			at[p.Name] = when
			t.Logf("%s: %s", when.Format("15:04:05.000"), e.Message)
		}
	}
	return at
}
