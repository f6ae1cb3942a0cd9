package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// schedulerWarmup is how long a freshly started scheduler is left to list the cluster before a
// job round submits its work, the same for both.
const schedulerWarmup = 5 * time.Second

// A job round measures what an HPC user waits for: a job of o.pods one-CPU workers submitted,
// until every worker is bound. With the placer the job is an HPCJob, which the placer expands
// and places as a gang, creating each worker bound to its node and NUMA node (one API write per
// worker). With kube-scheduler the same workers are created as pods by the benchmark, as a
// controller would, and kube-scheduler binds each (a create and a binding per worker). Both
// schedulers run alone and warmed up; the clock starts when the job (or its first pod) is
// submitted.
func jobRound(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, o *options, log *slog.Logger, placer bool, round int) (*roundResult, error) {
	name := "kube-scheduler"
	if placer {
		name = "placer"
	}
	tag := fmt.Sprintf("job-%s-%d", name, round)
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: roundLabel + "=" + tag})
	if err != nil {
		return nil, fmt.Errorf("list the pods of round %s: %w", tag, err)
	}
	p, err := startScheduler(o, placer)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	select {
	case <-time.After(schedulerWarmup):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	wait := startWatch(wctx, kube, tag, list.ResourceVersion, o.pods)
	t0 := time.Now()
	if placer {
		err = submitJob(wctx, dyn, tag, o.pods)
	} else {
		err = parallel(o.pods, 32, func(i int) error {
			_, err := kube.CoreV1().Pods(namespace).Create(wctx, benchPod(fmt.Sprintf("%s-%05d", tag, i), tag, kubeName, 1), metav1.CreateOptions{})
			return err
		})
	}
	if err != nil {
		cancel()
		_, _ = wait()
		return nil, fmt.Errorf("submit the job of round %s: %w", tag, err)
	}
	b, err := wait()
	p.stop()
	res := summarize(name, round, o.pods, t0, b)
	res.CPU = p.cpu().Seconds()
	res.Kind = kindJob
	if err == nil && placer {
		res.Annotated, err = annotated(ctx, kube, tag)
	}
	if derr := deleteJob(ctx, kube, dyn, tag); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return res, fmt.Errorf("round %s: %d of %d workers bound: %w", tag, res.Bound, o.pods, err)
	}
	log.Info("job round done", "round", tag, "bound", res.Bound, "podsPerSecond", fmt.Sprintf("%.0f", res.Rate))
	return res, nil
}

// benchJob is the HPCJob of a job round: workers one-CPU tasks, one per worker (granularity
// "granularity"), spread over the fake nodes, every pod confined to them.
func benchJob(name string, workers int) *v1alpha1.HPCJob {
	tmpl := func(container string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{benchLabel: benchValue, roundLabel: name}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{benchLabel: benchValue},
				Tolerations:  []corev1.Toleration{toleration},
				Containers:   []corev1.Container{{Name: container, Image: "registry.k8s.io/pause:3.10"}},
			},
		}
	}
	return &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{benchLabel: benchValue}},
		Spec: v1alpha1.HPCJobSpec{
			Tasks:         int32(workers),
			Profile:       v1alpha1.ProfileCPU,
			Granularity:   v1alpha1.GranularityFine,
			TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
			Launcher:      tmpl("mpirun"),
			Worker:        tmpl("worker"),
		},
	}
}

func submitJob(ctx context.Context, dyn dynamic.Interface, name string, workers int) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(benchJob(name, workers))
	if err != nil {
		return fmt.Errorf("encode HPCJob %s: %w", name, err)
	}
	_, err = dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// deleteJob removes a job round's HPCJob (if any) and its pods.
func deleteJob(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, round string) error {
	err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Delete(ctx, round, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete HPCJob %s: %w", round, err)
	}
	return deletePods(ctx, kube, round)
}
