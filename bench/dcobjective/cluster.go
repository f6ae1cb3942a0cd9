package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/internal/loadgen"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

const (
	// workerImage holds cpuservice and fgworker (hack/images/build.sh).
	workerImage = "localhost/finegrain-worker:dev"
	serviceName = "web"
	servicePort = 8080
	// p99Metric is cpuservice's gauge of the p99 over its last -window, which the objective reads.
	p99Metric  = "cpuservice_request_duration_p99_seconds"
	hpcJobName = "hpc"
)

var serviceLabels = map[string]string{"app": serviceName}

// bench holds the cluster's clients and the run's options.
type bench struct {
	o      options
	client kubernetes.Interface
	dyn    dynamic.Interface
	nodes  []string
	log    io.Writer
}

func newBench(o options, log io.Writer) (*bench, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &bench{o: o, client: client, dyn: dyn, nodes: slices.Sorted(maps.Keys(o.cgroupRoots)), log: log}, nil
}

// runArm runs one arm from scratch in a namespace of its own, removed afterwards.
func (b *bench) runArm(ctx context.Context, arm string) (*servicerun.Measured, error) {
	ns := "dc-objective-" + arm
	if err := b.freshNamespace(ctx, ns); err != nil {
		return nil, err
	}
	defer b.deleteNamespace(ns)
	if _, err := b.client.AppsV1().Deployments(ns).Create(ctx, b.deployment(), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create Deployment %s/%s: %w", ns, serviceName, err)
	}
	switch arm {
	case armHPA:
		if _, err := b.client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, b.hpa(), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create HorizontalPodAutoscaler %s/%s: %w", ns, serviceName, err)
		}
	case armFinegrain:
		if err := b.createObjective(ctx, ns); err != nil {
			return nil, err
		}
	}
	if err := b.waitReady(ctx, ns, arm); err != nil {
		return nil, err
	}
	s := b.sampler(ns, arm)
	if err := s.Sample(ctx); err != nil {
		return nil, err
	}
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan error, 1)
	go func() { sampled <- s.Loop(sctx) }()
	var hpc hpcPlacement
	hpcErr := make(chan error, 1)
	go func() {
		var err error
		hpc, err = b.hpcJobAt(sctx, ns)
		hpcErr <- err
	}()

	opts := loadgen.DefaultOptions(b.o.trace)
	opts.Timeout = 10 * time.Second
	fmt.Fprintf(b.log, "dcobjective: %s of load on %s/%s; an HPCJob takes a core at %s\n", b.o.trace.Duration(), ns, serviceName, b.o.hpcAt)
	rep, err := loadgen.Run(ctx, opts, s.Doer(loadgen.NewHTTPClient(opts.MaxInFlight)))
	if err != nil {
		stopSampling()
		return nil, err
	}
	if err := s.Sample(ctx); err != nil {
		stopSampling()
		return nil, err
	}
	stopSampling()
	if err := <-sampled; err != nil {
		return nil, err
	}
	if err := <-hpcErr; err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	m := servicerun.Measure(rep, s.Points(rep.Start), b.o.target.Seconds())
	m.HPCNode, m.HPCNodeRunsService = hpc.node, hpc.servicePods > 0
	return m, nil
}

// sampler samples the arm's service every second: for hpa with the HPA's utilisation as its
// note, for finegrain with the objective's decided size and decision.
func (b *bench) sampler(ns, arm string) *servicerun.Sampler {
	s := &servicerun.Sampler{
		Client: b.client, Namespace: ns, Name: serviceName, Port: servicePort, Path: "/work",
		CPUSeconds: servicerun.CgroupCPUSeconds(b.o.cgroupFS, b.o.cgroupRoots),
	}
	switch arm {
	case armFinegrain:
		s.Decided = servicerun.ObjectiveDecided(b.dyn, ns, serviceName)
	case armHPA:
		s.Decided = func(ctx context.Context) (float64, string, error) {
			h, err := b.client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, serviceName, metav1.GetOptions{})
			if err != nil {
				return 0, "", err
			}
			if u := hpaUtilization(h); u != nil {
				return 0, fmt.Sprintf("CPU utilisation %d%% (target %d%%), desired replicas %d", *u, b.o.hpaTarget, h.Status.DesiredReplicas), nil
			}
			return 0, "", nil
		}
	}
	return s
}

// freshNamespace creates ns, first removing one left by an earlier run.
func (b *bench) freshNamespace(ctx context.Context, ns string) error {
	if _, err := b.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(b.log, "dcobjective: removing namespace %s left by an earlier run\n", ns)
		b.deleteNamespace(ns)
	}
	_, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// deleteNamespace deletes ns and waits (up to two minutes) until it is gone, so that the next
// arm starts on a cluster without its pods.
func (b *bench) deleteNamespace(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(b.log, "dcobjective: delete namespace %s: %v\n", ns, err)
		return
	}
	for ctx.Err() == nil {
		if _, err := b.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		sleep(ctx, time.Second)
	}
	fmt.Fprintf(b.log, "dcobjective: namespace %s still there after two minutes\n", ns)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// deployment is the service: one Guaranteed pod of cpuservice on the pod network, placed by the
// placer, Ready once it answers /healthz.
func (b *bench) deployment() *appsv1.Deployment {
	size := corev1.ResourceList{corev1.ResourceCPU: b.o.podCPU, corev1.ResourceMemory: resource.MustParse("128Mi")}
	ctr := corev1.Container{
		Name: serviceName, Image: workerImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/usr/local/bin/cpuservice", "-listen", ":" + strconv.Itoa(servicePort), "-work", strconv.Itoa(b.o.work)},
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: servicePort}},
		Resources: corev1.ResourceRequirements{
			Requests: size, Limits: size.DeepCopy(),
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(servicePort)}},
			PeriodSeconds: 1,
		},
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: serviceLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: serviceLabels},
				Spec: corev1.PodSpec{
					SchedulerName:                 v1alpha1.DefaultSchedulerName,
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{ctr},
				},
			},
		},
	}
}

// hpa scales the Deployment between 1 and -max-replicas pods on their average CPU utilisation,
// with the controller's default behaviour but for the scale-down stabilisation, which is
// -scale-down-stabilization, as the ServiceObjective's.
func (b *bench) hpa() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: serviceName},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    b.o.maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(b.o.hpaTarget)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(b.o.stabilize / time.Second))},
			},
		},
	}
}

// createObjective holds the Deployment to p99 ≤ -target, read from its pods' own gauge, with
// 250m to -max-pod-cpu per pod, 1 to -max-replicas replicas and -scale-down-stabilization.
func (b *bench) createObjective(ctx context.Context, ns string) error {
	res := b.dyn.Resource(v1alpha1.ServiceObjectiveGroupVersionResource)
	if _, err := res.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("the API server does not serve ServiceObjectives (%v): deploy finegrain with its CRD (kubectl apply -k hack/cluster/overlay-nodes)", err)
	}
	mem := resource.MustParse("128Mi")
	obj := &v1alpha1.ServiceObjective{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ServiceObjectiveKind},
		ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: ns},
		Spec: v1alpha1.ServiceObjectiveSpec{
			TargetRef: v1alpha1.ObjectiveTargetRef{Kind: v1alpha1.TargetDeployment, Name: serviceName},
			Metric: v1alpha1.ObjectiveMetric{
				Target:    *resource.NewMilliQuantity(b.o.target.Milliseconds(), resource.DecimalSI),
				Direction: v1alpha1.AtMost,
				Source:    v1alpha1.MetricSource{Pods: &v1alpha1.PodsMetricSource{Port: servicePort, Metric: p99Metric}},
			},
			PodBounds: v1alpha1.PodBounds{
				Min: v1alpha1.PodSize{CPU: resource.MustParse("250m"), Memory: mem, IOBandwidth: resource.MustParse("1M")},
				Max: v1alpha1.PodSize{CPU: b.o.maxPodCPU, Memory: mem, IOBandwidth: resource.MustParse("100M")},
			},
			Replicas:                      v1alpha1.ReplicaBounds{Min: 1, Max: b.o.maxReplicas},
			PeriodSeconds:                 b.o.period,
			ScaleDownStabilizationSeconds: int32(b.o.stabilize / time.Second),
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(m, "status")
	if _, err := res.Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ServiceObjective %s/%s: %w", ns, serviceName, err)
	}
	return nil
}

// waitReady waits for a Ready pod, then for the arm's autoscaler to act on the service: the HPA
// to read a CPU utilisation from the metrics API, the placer's loop to adopt the objective (its
// status holds a size and the pods run with it).
func (b *bench) waitReady(ctx context.Context, ns, arm string) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.readyWait)
	defer cancel()
	why := "no pod Ready"
	for {
		var err error
		why, err = b.notReady(ctx, ns, arm)
		if err != nil {
			return err
		}
		if why == "" {
			return nil
		}
		sleep(ctx, time.Second)
		if ctx.Err() != nil {
			return fmt.Errorf("arm %s not ready after %s: %s", arm, b.o.readyWait, why)
		}
	}
}

// notReady says what the arm still waits for ("" when nothing).
func (b *bench) notReady(ctx context.Context, ns, arm string) (string, error) {
	pods, err := b.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + serviceName})
	if err != nil {
		return "", err
	}
	ready := 0
	for i := range pods.Items {
		if servicerun.PodReady(&pods.Items[i]) {
			ready++
		}
	}
	if ready == 0 {
		return fmt.Sprintf("Deployment %s/%s has %d pods, none Ready", ns, serviceName, len(pods.Items)), nil
	}
	switch arm {
	case armHPA:
		h, err := b.client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, serviceName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if hpaUtilization(h) == nil {
			return fmt.Sprintf("the HorizontalPodAutoscaler has no CPU utilisation from the metrics API yet (metrics.k8s.io: is metrics-server running and its APIService Available?); conditions %s", hpaConditions(h)), nil
		}
	case armFinegrain:
		obj, err := servicerun.Objective(ctx, b.dyn, ns, serviceName)
		if err != nil {
			return "", err
		}
		if obj.Status.PodSize == nil {
			return fmt.Sprintf("the placer's ServiceObjective loop has not adopted objective %s/%s (its status has no podSize; conditions %+v): is the placer running with the loop?", ns, serviceName, obj.Status.Conditions), nil
		}
		want := obj.Status.PodSize.CPU.MilliValue()
		for i := range pods.Items {
			if got := pods.Items[i].Spec.Containers[0].Resources.Limits.Cpu().MilliValue(); got != want {
				return fmt.Sprintf("pod %s runs with %dm CPU, the objective says %dm", pods.Items[i].Name, got, want), nil
			}
		}
	}
	return "", nil
}

// hpaUtilization is the average CPU utilisation the HPA last computed (nil when it has none: the
// controller keeps an empty entry for a metric it could not read).
func hpaUtilization(h *autoscalingv2.HorizontalPodAutoscaler) *int32 {
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			return m.Resource.Current.AverageUtilization
		}
	}
	return nil
}

func hpaConditions(h *autoscalingv2.HorizontalPodAutoscaler) string {
	s := ""
	for _, c := range h.Status.Conditions {
		s += fmt.Sprintf("[%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	if s == "" {
		return "none yet"
	}
	return s
}

// nodeRoom is what the HPC job's placement looks at on a node.
type nodeRoom struct {
	node string
	// freeMilli is the CPU no pod requests; servicePods counts the service's running pods.
	freeMilli   int64
	servicePods int
}

// hpcPlacement is where the HPC job went.
type hpcPlacement struct {
	node        string
	servicePods int
}

// chooseHPCNode picks the node of the HPC job's 1-CPU worker: one running the service with a
// whole CPU unrequested (the most service pods first: the job takes a core from their shared
// pool), else any node with a CPU unrequested (on this test bed every node shares the host's
// CPUs, so its work still competes with the service's), else the first node running the
// service, where the job waits for room. False when no node runs the service.
func chooseHPCNode(rooms []nodeRoom) (nodeRoom, bool) {
	if !slices.ContainsFunc(rooms, func(r nodeRoom) bool { return r.servicePods > 0 }) {
		return nodeRoom{}, false
	}
	var best, spare, busy *nodeRoom
	for i := range rooms {
		r := &rooms[i]
		switch {
		case r.servicePods > 0 && r.freeMilli >= 1000:
			if best == nil || r.servicePods > best.servicePods {
				best = r
			}
		case r.freeMilli >= 1000:
			if spare == nil {
				spare = r
			}
		case r.servicePods > 0:
			if busy == nil {
				busy = r
			}
		}
	}
	for _, r := range []*nodeRoom{best, spare, busy} {
		if r != nil {
			return *r, true
		}
	}
	return nodeRoom{}, false
}

// rooms lists the nodes with their unrequested CPU and the service's running pods.
func (b *bench) rooms(ctx context.Context, ns string) ([]nodeRoom, error) {
	nodes, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := b.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byName := map[string]*nodeRoom{}
	var rooms []nodeRoom
	for _, n := range nodes.Items {
		rooms = append(rooms, nodeRoom{node: n.Name, freeMilli: n.Status.Allocatable.Cpu().MilliValue()})
	}
	for i := range rooms {
		byName[rooms[i].node] = &rooms[i]
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		r := byName[p.Spec.NodeName]
		if r == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			r.freeMilli -= c.Resources.Requests.Cpu().MilliValue()
		}
		if p.Namespace == ns && p.Labels["app"] == serviceName && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			r.servicePods++
		}
	}
	return rooms, nil
}

// hpcJobAt creates, at -hpc-at into the load, an HPCJob of one 1-CPU task on the node
// chooseHPCNode picks: its worker (labelled finegrain.dev/pinning=exclusive by the placer) gets
// an exclusive core, which the node agent takes out of the node's shared pool, and multiplies
// matrices on it for the rest of the trace. The job is deleted with the namespace.
func (b *bench) hpcJobAt(ctx context.Context, ns string) (hpcPlacement, error) {
	sleep(ctx, b.o.hpcAt)
	if ctx.Err() != nil {
		return hpcPlacement{}, nil
	}
	rooms, err := b.rooms(ctx, ns)
	if err != nil {
		return hpcPlacement{}, fmt.Errorf("HPC job: %w", err)
	}
	room, ok := chooseHPCNode(rooms)
	if !ok {
		return hpcPlacement{}, fmt.Errorf("HPC job: no node runs a pod of %s/%s at %s", ns, serviceName, b.o.hpcAt)
	}
	rest := b.o.trace.Duration() - b.o.hpcAt
	pod := func(command ...string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: room.node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "main", Image: workerImage, ImagePullPolicy: corev1.PullNever, Command: command}},
		}}
	}
	job := &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: hpcJobName, Namespace: ns},
		Spec: v1alpha1.HPCJobSpec{
			Tasks: 1, Profile: v1alpha1.ProfileCPU, LauncherCreationPolicy: v1alpha1.AtStartup,
			TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("256Mi")},
			Gang:          v1alpha1.GangPolicy{TimeoutSeconds: int32(rest.Seconds())},
			Launcher:      pod(),
			Worker:        pod("/usr/local/bin/fgworker", "dgemm", "-np", "1", "-n", "256", "-duration", rest.String(), "-o", "log"),
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		return hpcPlacement{}, err
	}
	delete(m, "status")
	if _, err := b.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return hpcPlacement{}, nil
		}
		return hpcPlacement{}, fmt.Errorf("create HPCJob %s/%s: %w", ns, hpcJobName, err)
	}
	fmt.Fprintf(b.log, "dcobjective: HPCJob %s/%s created: one pinned core on %s (%d pods of the service there, %dm CPU unrequested)\n",
		ns, hpcJobName, room.node, room.servicePods, room.freeMilli)
	return hpcPlacement{node: room.node, servicePods: room.servicePods}, nil
}
