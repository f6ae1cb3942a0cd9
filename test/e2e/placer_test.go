//go:build e2e

// The placer on the real cluster: the HPCJob CRD's validation by the API server, a job's gang
// bound whole through pods/binding with the NUMA annotation the node agent trusts, and two
// gangs that cannot both fit: one is bound whole, the other holds nothing and waits, and is
// bound once the first is gone.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

const placerTimeout = 2 * time.Minute

// deployPlacer applies daemonset/ (local overlay), waits for the HPCJob API and a ready placer,
// and returns the most CPUs one NUMA node of the node offers pinned workers.
func deployPlacer(t *testing.T) (*framework.Cluster, int) {
	t.Helper()
	c := framework.Setup(t)
	if len(c.Nodes) > 1 {
		// hack/cluster/overlay points the placer at the API server on 127.0.0.1:6443, the host's
		// loopback, which a node of a multi-node cluster (a network namespace of its own) cannot reach.
		t.Skipf("deploys the single-node overlay (hack/cluster/overlay) and this cluster has %d nodes: run it on make cluster-up's one node, as make e2e's single-node passes do", len(c.Nodes))
	}
	c.ApplyKustomize(t, "hack/cluster/overlay")
	framework.Eventually(t, "the HPCJob CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
	framework.Eventually(t, "the placer Deployment to be available", placerTimeout, func(ctx context.Context) error {
		d, err := c.Client.AppsV1().Deployments(framework.SystemNamespace).Get(ctx, "finegrain-placer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
	return c, freeCores(t, c)
}

// freeCores reads the node's free-core map. When no node agent publishes one (not deployed, or
// standing aside for a static-policy kubelet), the test publishes a map of its own for the
// placer — every CPU but CPU 0 free — and removes it at the end.
func freeCores(t *testing.T, c *framework.Cluster) int {
	t.Helper()
	ctx := context.Background()
	nrts := c.Dynamic.Resource(nrt.GroupVersionResource)
	_, err := framework.Poll(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := nrts.Get(ctx, c.NodeName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) || c.CPUManagerPolicy != "static" {
			return err
		}
		// An agent beside a static-policy kubelet publishes nothing and says so once on the
		// node: no need to wait out the poll for a map that will not come.
		evs, lerr := c.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + c.NodeName + ",reason=" + agent.ReasonKubeletStaticPolicy})
		if lerr == nil && len(evs.Items) > 0 {
			return framework.Permanent(err)
		}
		return err
	})
	node, nerr := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if nerr != nil {
		t.Fatal(nerr)
	}
	if apierrors.IsNotFound(err) {
		cpus := int(node.Status.Capacity.Cpu().Value())
		if cpus < 2 {
			t.Skipf("node %s has %d CPU; the placer tests need one to pin besides CPU 0", c.NodeName, cpus)
		}
		u := st.NRT(c.NodeName, 1, st.Zone{Free: fmt.Sprintf("1-%d", cpus-1), Available: -1})
		if _, err := nrts.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("publish a free-core map for %s: %v", c.NodeName, err)
		}
		t.Cleanup(func() { _ = nrts.Delete(context.Background(), c.NodeName, metav1.DeleteOptions{}) })
		t.Logf("no node agent publishes a free-core map; the test published CPUs 1-%d", cpus-1)
	} else if err != nil {
		t.Fatalf("read the free-core map of %s: %v", c.NodeName, err)
	}
	u, err := nrts.Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.NodeName})
	if err != nil {
		t.Fatal(err)
	}
	in := snapshot.Input{Nodes: []*corev1.Node{node}, Topologies: []*unstructured.Unstructured{u}}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	s := snapshot.Build(in)
	if s.Nodes[0].TopologyProblem != "" {
		t.Fatalf("the free-core map of %s is unusable: %s", c.NodeName, s.Nodes[0].TopologyProblem)
	}
	// A worker needs its CPUs both in one NUMA node and among the node's unrequested CPUs.
	n := &s.Nodes[0]
	free := min(plan.LargestZone(s), int((n.Allocatable.MilliCPU-n.Requested.MilliCPU)/1000))
	if free < 1 {
		t.Skipf("node %s has no free exclusive CPU (map %v)", c.NodeName, s.ZonesOf(0))
	}
	return free
}

// testJob is a network-bound job of tasks 1-CPU tasks: one worker holding every task, on one
// NUMA node. Its pods idle (the worker image runs no sshd, so its workers never become Ready and
// the launcher is created with them, AtStartup); they use the host's network like every pod of
// the local cluster.
func testJob(name string, tasks int) *v1alpha1.HPCJob {
	pod := func(ctr string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{framework.Container(ctr, framework.WorkerImage)},
		}}
	}
	return &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.HPCJobSpec{
			Tasks: int32(tasks), Profile: v1alpha1.ProfileNetwork, LauncherCreationPolicy: v1alpha1.AtStartup,
			TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("32Mi")},
			Gang:          v1alpha1.GangPolicy{TimeoutSeconds: 30},
			Launcher:      pod("mpirun"),
			Worker:        pod("worker"),
		},
	}
}

func createJob(t *testing.T, c *framework.Cluster, ns string, job *v1alpha1.HPCJob) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(),
		&unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HPCJob %s/%s: %v", ns, job.Name, err)
	}
	c.OnFailure(t, "HPCJob "+ns+"/"+job.Name, func(ctx context.Context, w io.Writer) error {
		got, err := getJob(ctx, c, ns, job.Name)
		if err != nil {
			return err
		}
		data, _ := json.MarshalIndent(got.Status, "", "  ")
		_, err = w.Write(data)
		return err
	})
}

func getJob(ctx context.Context, c *framework.Cluster, ns, name string) (*v1alpha1.HPCJob, error) {
	u, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var job v1alpha1.HPCJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// jobPods lists a job's pods: bound and pending.
func jobPods(ctx context.Context, c *framework.Cluster, ns, job string) (bound, pending []corev1.Pod, err error) {
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob + "=" + job})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
		} else {
			pending = append(pending, p)
		}
	}
	return bound, pending, nil
}

func TestHPCJobCRDValidates(t *testing.T) {
	c, _ := deployPlacer(t)
	ns := c.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*v1alpha1.HPCJob)
		want   string
	}{
		{"fractional-cpu", func(j *v1alpha1.HPCJob) { j.Spec.TaskResources.CPU = resource.MustParse("500m") }, "whole number of CPUs"},
		{"no-workers", func(j *v1alpha1.HPCJob) { j.Spec.Granularity = v1alpha1.GranularityNone }, "granularity none runs exactly spec.workers workers"},
		{"bad-profile", func(j *v1alpha1.HPCJob) { j.Spec.Profile = "disk" }, `Unsupported value: "disk"`},
		{"elastic-indivisible", func(j *v1alpha1.HPCJob) {
			j.Spec.Tasks, j.Spec.Elastic = 10, &v1alpha1.Elastic{MinReplicas: 1, MaxReplicas: 4}
		}, "elastic.maxReplicas must divide spec.tasks"},
		{"node-name", func(j *v1alpha1.HPCJob) { j.Spec.Worker.Spec.NodeName = "n1" }, "the placer chooses nodes"},
	}
	for _, tc := range tests {
		job := testJob("bad-"+tc.name, 1)
		tc.mutate(job)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(),
			&unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: API server answered %v, want a rejection saying %q", tc.name, err, tc.want)
		}
	}
}

func TestHPCJobBoundWholeWithNUMAAnnotation(t *testing.T) {
	c, free := deployPlacer(t)
	ns := c.Namespace(t)
	createJob(t, c, ns, testJob("lulesh", free))
	var job *v1alpha1.HPCJob
	framework.Eventually(t, "HPCJob lulesh to run", placerTimeout, func(ctx context.Context) error {
		var err error
		if job, err = getJob(ctx, c, ns, "lulesh"); err != nil {
			return err
		}
		if job.Status.Phase != v1alpha1.PhaseRunning {
			return fmt.Errorf("phase %q, conditions %+v", job.Status.Phase, job.Status.Conditions)
		}
		return nil
	})
	if len(job.Status.Placements) != 1 || job.Status.Placements[0].Node != c.NodeName || job.Status.StartTime == nil {
		t.Errorf("status %+v", job.Status)
	}
	bound, pending, err := jobPods(context.Background(), c, ns, "lulesh")
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != 2 || len(pending) != 0 {
		t.Fatalf("%d pods bound, %d pending; want the worker and the launcher bound", len(bound), len(pending))
	}
	for _, p := range bound {
		if p.Spec.SchedulerName != v1alpha1.DefaultSchedulerName {
			t.Errorf("pod %s has schedulerName %q", p.Name, p.Spec.SchedulerName)
		}
		switch p.Labels[v1alpha1.LabelRole] {
		case v1alpha1.RoleWorker:
			want := fmt.Sprint(job.Status.Placements[0].NUMANode)
			if p.Annotations[v1alpha1.AnnotationNUMANode] != want || p.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive {
				t.Errorf("worker %s: annotations %v labels %v; want %s=%s and the pinning label", p.Name, p.Annotations, p.Labels, v1alpha1.AnnotationNUMANode, want)
			}
			if got := p.Spec.Containers[0].Resources.Requests.Cpu().Value(); got != int64(free) {
				t.Errorf("worker asks for %d CPUs, want %d", got, free)
			}
		case v1alpha1.RoleLauncher:
			if _, ok := p.Annotations[v1alpha1.AnnotationNUMANode]; ok {
				t.Errorf("launcher %s carries a NUMA annotation", p.Name)
			}
		}
	}
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "lulesh-hostfile", metav1.GetOptions{})
	if want := fmt.Sprintf("lulesh-worker-0.lulesh-workers.%s.svc slots=%d\n", ns, free); err != nil || cm.Data["hostfile"] != want {
		t.Errorf("hostfile %v (%v), want %q", cm.Data, err, want)
	}
	svc, err := c.Client.CoreV1().Services(ns).Get(context.Background(), "lulesh-workers", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service %+v (%v), want headless", svc, err)
	}
}

// Two jobs that each need every free exclusive CPU: one runs whole, the other creates no pod
// at all while it waits, and runs whole once the first is deleted.
func TestTwoGangsNeverDeadlockNorHalfBind(t *testing.T) {
	c, free := deployPlacer(t)
	ns := c.Namespace(t)
	createJob(t, c, ns, testJob("a", free))
	createJob(t, c, ns, testJob("b", free))
	var first, second string
	framework.Eventually(t, "one of the jobs to run", placerTimeout, func(ctx context.Context) error {
		for _, name := range []string{"a", "b"} {
			j, err := getJob(ctx, c, ns, name)
			if err != nil {
				return err
			}
			if j.Status.Phase == v1alpha1.PhaseRunning {
				first, second = name, map[string]string{"a": "b", "b": "a"}[name]
				return nil
			}
		}
		return fmt.Errorf("neither job runs")
	})
	framework.Consistently(t, "job "+first+" bound whole and job "+second+" holding nothing", 10*time.Second, func(ctx context.Context) error {
		b, p, err := jobPods(ctx, c, ns, first)
		if err != nil {
			return err
		}
		if len(b) != 2 || len(p) != 0 {
			return fmt.Errorf("running job %s: %d bound, %d pending", first, len(b), len(p))
		}
		b, p, err = jobPods(ctx, c, ns, second)
		if err != nil {
			return err
		}
		if len(b)+len(p) != 0 {
			return fmt.Errorf("waiting job %s has %d bound and %d pending pods", second, len(b), len(p))
		}
		return nil
	})
	j, err := getJob(context.Background(), c, ns, second)
	if err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(j.Status.Conditions, controller.ConditionScheduled); cond == nil || cond.Status != metav1.ConditionFalse ||
		!strings.Contains(cond.Message, "fits none of 1 nodes") {
		t.Errorf("waiting job's Scheduled condition %+v", cond)
	}

	policy := metav1.DeletePropagationForeground
	if err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(context.Background(), first,
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "job "+second+" to run whole after "+first+" is deleted", placerTimeout, func(ctx context.Context) error {
		b, p, err := jobPods(ctx, c, ns, second)
		if err != nil {
			return err
		}
		if len(b) != 2 || len(p) != 0 {
			return fmt.Errorf("%d bound, %d pending", len(b), len(p))
		}
		return nil
	})
}

// A pod gang that cannot fit binds no pod.
func TestPodGangNeverHalfBinds(t *testing.T) {
	c, free := deployPlacer(t)
	ns := c.Namespace(t)
	for i := range 2 {
		ctr := framework.Container("main", framework.WorkerImage)
		q := *resource.NewQuantity(int64(free), resource.DecimalSI)
		ctr.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q, corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q, corev1.ResourceMemory: resource.MustParse("32Mi")},
		}
		pod := framework.Pod(fmt.Sprintf("rank-%d", i), ctr)
		pod.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
		pod.Labels = map[string]string{
			v1alpha1.LabelPinning: v1alpha1.PinningExclusive, v1alpha1.LabelPodGroup: "ranks", v1alpha1.LabelPodGroupMinAvailable: "2",
		}
		c.CreatePod(t, ns, pod)
	}
	framework.Eventually(t, "an event saying why the gang waits", placerTimeout, func(ctx context.Context) error {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + controller.ReasonUnschedulable})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no %s event yet", controller.ReasonUnschedulable)
		}
		return nil
	})
	framework.Consistently(t, "no pod of the gang bound", 10*time.Second, func(ctx context.Context) error {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				return fmt.Errorf("pod %s bound to %s", p.Name, p.Spec.NodeName)
			}
		}
		return nil
	})
}
