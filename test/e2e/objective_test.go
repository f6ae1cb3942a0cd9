//go:build e2e

// A ServiceObjective on the real cluster (issue 20): the placer's loop reads a Deployment's own
// Prometheus endpoint, grows its pod in place through the resize subresource when the metric
// violates the target — the kubelet then gives the container a CFS quota of the new size — and
// shrinks it back once the metric beats the target by the margin and the violation is no longer
// recalled.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/objectives"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

const objectiveMetric = "fg_e2e_p99_seconds"

func TestServiceObjectiveResizesInPlace(t *testing.T) {
	framework.Setup(t).RequireCPUManagerPolicy(t, "none") // the static policy makes resizes of Guaranteed pods infeasible
	c, _ := deployPlacer(t)
	began := time.Now()
	requireResizeSubresource(t, c)
	waitForObjectiveCRD(t, c)
	ns := c.Namespace(t)
	c.DumpOnFailure(t, ns)
	port := freeHostPort(t)

	// The service: one pod of 500m CPU (Guaranteed), placed by the placer, whose p99 the test sets.
	createGaugeDeployment(t, c, ns, port, "0.019")
	pod := waitForServicePod(t, c, ns)
	t.Logf("the service's pod is Ready %.1f s after the placer", time.Since(began).Seconds())
	if pod.Status.ContainerStatuses[0].Resources == nil {
		t.Skipf("the kubelet of node %s reports no container resources: in-place pod resize (InPlacePodVerticalScaling) is off there", pod.Spec.NodeName)
	}
	createObjective(t, c, ns, port)
	start := time.Now()

	// 1. The loop adopts the service at the thesis's starting size, one core (within the bounds),
	//    with the metric within the margin.
	size := waitForSize(t, c, ns, "the starting size of one core", func(cpu int64) bool { return cpu == 1000 })
	adopted := time.Since(start)

	// 2. p99 30 ms against 20 ms: the pod grows in place by the shortfall.
	setGauge(t, pod, port, "0.030")
	grown := waitForSize(t, c, ns, "a growth", func(cpu int64) bool { return cpu > 1000 })
	grew := time.Since(start)

	// 3. p99 5 ms: once the violation is no longer recalled (30 periods) and a window of samples
	//    beat the target by more than the margin, the pod shrinks.
	setGauge(t, pod, port, "0.005")
	shrunk := waitForSize(t, c, ns, "a shrink", func(cpu int64) bool { return cpu < grown })
	t.Logf("CPU per pod: 500m → %dm (adopted, %.1f s) → %dm (violated, %.1f s) → %dm (over-performing, %.1f s after the objective was made)",
		size, adopted.Seconds(), grown, grew.Seconds(), shrunk, time.Since(start).Seconds())

	checkResizeEvents(t, c, ns)
	if v := placerMetric(t, c, fmt.Sprintf(`finegrain_objective_violation_seconds_total{namespace=%q,objective="web-p99"}`, ns)); v <= 0 {
		t.Errorf("violation seconds %v on the placer's /metrics, want > 0", v)
	}
}

// requireResizeSubresource skips unless the API server serves pods/resize.
func requireResizeSubresource(t *testing.T, c *framework.Cluster) {
	t.Helper()
	list, err := c.Client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" }) {
		t.Skip("the API server does not serve pods/resize: in-place pod resize (InPlacePodVerticalScaling, on by default since Kubernetes 1.33) is off")
	}
}

// freeHostPort is a TCP port free on the host, for a host-network pod of the local cluster.
func freeHostPort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

func createGaugeDeployment(t *testing.T, c *framework.Cluster, ns string, port int32, value string) {
	t.Helper()
	ctr := framework.Container("web", framework.WorkerImage, "gauge",
		fmt.Sprintf("--listen=:%d", port), "--name="+objectiveMetric, "--value="+value)
	createWebDeployment(t, c, ns, ctr, "500m", "/metrics", port)
}

// createWebDeployment makes Deployment web of one Guaranteed pod (cpu, 64Mi) of container ctr,
// on the host's network, placed by the placer, Ready once path answers on port. It is deleted,
// pods first, before the namespace.
func createWebDeployment(t *testing.T, c *framework.Cluster, ns string, ctr corev1.Container, cpu, path string, port int32) {
	t.Helper()
	size := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	ctr.Resources = corev1.ResourceRequirements{Requests: size, Limits: size.DeepCopy()}
	ctr.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
		PeriodSeconds: 1,
	}
	pod := framework.Pod("web", ctr)
	framework.LocalDefaults(pod)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.SchedulerName = v1alpha1.DefaultSchedulerName
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment web: %v", err)
	}
	// Before the namespace's pods are deleted (a cleanup registered earlier, so run later): the
	// Deployment would make new ones. Foreground: it is gone once its pods are.
	t.Cleanup(func() {
		deployments := c.Client.AppsV1().Deployments(ns)
		if err := deployments.Delete(context.Background(), "web", metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		}); err != nil {
			t.Errorf("delete Deployment web: %v", err)
			return
		}
		framework.Eventually(t, "Deployment web and its pods to go", framework.PodDeleteTimeout, func(ctx context.Context) error {
			if _, err := deployments.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
}

// waitForServicePod waits for the Deployment's pod to be Ready and returns it.
func waitForServicePod(t *testing.T, c *framework.Cluster, ns string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, "the pod of Deployment web to be Ready", framework.PodStartTimeout, func(ctx context.Context) error {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		for i := range l.Items {
			p := &l.Items[i]
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && len(p.Status.ContainerStatuses) == 1 {
					pod = p
					return nil
				}
			}
		}
		return fmt.Errorf("%d pods, none Ready", len(l.Items))
	})
	return pod
}

// createObjective holds Deployment web to p99 ≤ 20 ms, read every second from its pod's gauge,
// with 250m to 1500m CPU and 64Mi per pod and one replica (the pod holds a port of the host).
func createObjective(t *testing.T, c *framework.Cluster, ns string, port int32) {
	t.Helper()
	obj := &v1alpha1.ServiceObjective{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ServiceObjectiveKind},
		ObjectMeta: metav1.ObjectMeta{Name: "web-p99", Namespace: ns},
		Spec: v1alpha1.ServiceObjectiveSpec{
			TargetRef: v1alpha1.ObjectiveTargetRef{Kind: v1alpha1.TargetDeployment, Name: "web"},
			Metric: v1alpha1.ObjectiveMetric{
				Target: resource.MustParse("20m"), Direction: v1alpha1.AtMost,
				Source: v1alpha1.MetricSource{Pods: &v1alpha1.PodsMetricSource{Port: port, Metric: objectiveMetric}},
			},
			PodBounds: v1alpha1.PodBounds{
				Min: v1alpha1.PodSize{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi"), IOBandwidth: resource.MustParse("1M")},
				Max: v1alpha1.PodSize{CPU: resource.MustParse("1500m"), Memory: resource.MustParse("64Mi"), IOBandwidth: resource.MustParse("100M")},
			},
			Replicas:      v1alpha1.ReplicaBounds{Min: 1, Max: 1},
			PeriodSeconds: 1,
		},
	}
	createServiceObjective(t, c, obj)
}

func createServiceObjective(t *testing.T, c *framework.Cluster, obj *v1alpha1.ServiceObjective) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	u := &unstructured.Unstructured{Object: m}
	if _, err := c.Dynamic.Resource(v1alpha1.ServiceObjectiveGroupVersionResource).Namespace(obj.Namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceObjective %s/%s: %v", obj.Namespace, obj.Name, err)
	}
}

// objectiveTimeout bounds each step: the shrink waits out the 30-period recall of the violation.
const objectiveTimeout = 60 * time.Second

// waitForSize waits until the CPU per pod the objective's status holds satisfies ok and the
// service's pod runs with it — its spec, the kubelet's report and the CFS quota of its container's
// cgroup — and returns it in millicores.
func waitForSize(t *testing.T, c *framework.Cluster, ns, what string, ok func(milli int64) bool) int64 {
	t.Helper()
	var milli int64
	framework.Eventually(t, "objective web-p99: "+what+", applied to the pod", objectiveTimeout, func(ctx context.Context) error {
		obj, err := servicerun.Objective(ctx, c.Dynamic, ns, "web-p99")
		if err != nil {
			return err
		}
		st := &obj.Status
		if st.PodSize == nil || !ok(st.PodSize.CPU.MilliValue()) {
			return fmt.Errorf("status: decision %s/%s, size %d × %+v, smoothed %v, conditions %+v",
				st.LastDecision, st.LastDecisionReason, st.Replicas, st.PodSize, st.Smoothed, st.Conditions)
		}
		milli = st.PodSize.CPU.MilliValue()
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d pods, want 1", len(l.Items))
		}
		p := &l.Items[0]
		if got := p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue(); got != milli {
			return fmt.Errorf("status %dm, pod %s's CPU limit %dm", milli, p.Name, got)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].Resources == nil || cs[0].Resources.Limits.Cpu().MilliValue() != milli {
			return fmt.Errorf("status %dm, the kubelet reports %+v, pod conditions %+v", milli, cs, p.Status.Conditions)
		}
		dir, err := c.CgroupDir(p, "web", "cpu")
		if err != nil {
			return err
		}
		got, err := quotaMilli(dir)
		if err != nil {
			return err
		}
		if got != milli {
			return fmt.Errorf("status %dm, cgroup %s: quota %dm", milli, dir, got)
		}
		return nil
	})
	return milli
}

// quotaMilli is a cgroup's CFS quota in millicores: cpu.cfs_quota_us / cpu.cfs_period_us on
// cgroup v1, cpu.max on v2.
func quotaMilli(dir string) (int64, error) {
	var quota, period string
	if v, err := framework.ReadCgroupFile(dir, "cpu.max"); err == nil {
		f := strings.Fields(v)
		if len(f) != 2 {
			return 0, fmt.Errorf("%s: cpu.max is %q", dir, v)
		}
		quota, period = f[0], f[1]
	} else {
		if quota, err = framework.ReadCgroupFile(dir, "cpu.cfs_quota_us"); err != nil {
			return 0, err
		}
		if period, err = framework.ReadCgroupFile(dir, "cpu.cfs_period_us"); err != nil {
			return 0, err
		}
	}
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, fmt.Errorf("%s: quota %q, period %q: no CFS quota", filepath.Base(dir), quota, period)
	}
	return q * 1000 / p, nil
}

// setGauge sets the service's p99 through its gauge's PUT /value.
func setGauge(t *testing.T, pod *corev1.Pod, port int32, value string) {
	t.Helper()
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))) + "/value"
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(value))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("set the gauge to %s: %v", value, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("set the gauge to %s: %s", value, resp.Status)
	}
}

// checkResizeEvents checks that every resize left a Resized event on the objective.
func checkResizeEvents(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	framework.Eventually(t, "Resized events on objective web-p99", 30*time.Second, func(ctx context.Context) error {
		l, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, e := range l.Items {
			if e.Reason == objectives.EventResized && e.Regarding.Kind == v1alpha1.ServiceObjectiveKind && e.Regarding.Name == "web-p99" {
				n++
			}
		}
		if n < 3 {
			return fmt.Errorf("%d Resized events, want one per resize (3)", n)
		}
		return nil
	})
}

// placerMetric reads a series from the leading placer's /metrics (-1 when no placer has it).
func placerMetric(t *testing.T, c *framework.Cluster, series string) float64 {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=finegrain-placer"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "10261") + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
				resp.Body.Close()
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", series, err)
				}
				return f
			}
		}
		resp.Body.Close()
	}
	return -1
}
