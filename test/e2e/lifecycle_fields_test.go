//go:build e2e

// HPCJob lifecycle fields MPI Operator users look for, on the real cluster: runPolicy.suspend
// deletes a running job's pods and keeps the job, Suspended, until it is resumed and placed
// again; runLauncherAsWorker with slotsPerWorker runs the first ranks in the pinned launcher,
// beside a worker on another node.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// setSuspend patches the job's runPolicy.suspend, as kubectl patch --type merge does.
func setSuspend(t *testing.T, c *framework.Cluster, ns, name string, suspend bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"runPolicy":{"suspend":%t}}}`, suspend)
	if _, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Patch(context.Background(), name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("suspend=%t HPCJob %s/%s: %v", suspend, ns, name, err)
	}
}

func TestHPCJobSuspendAndResume(t *testing.T) {
	c, _ := deployPlacer(t)
	c.RequireCPUManagerPolicy(t, "none")
	ns := c.Namespace(t)
	createJob(t, c, ns, testJob("sus", 1))
	c.DumpOnFailure(t, ns)
	waitPhase(t, c, ns, "sus", v1alpha1.PhaseRunning, placerTimeout)

	setSuspend(t, c, ns, "sus", true)
	framework.Eventually(t, "the job Suspended with no pods", placerTimeout, func(ctx context.Context) error {
		j, err := getJob(ctx, c, ns, "sus")
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(j.Status.Conditions, controller.ConditionSuspended)
		if j.Status.Phase != v1alpha1.PhaseSuspended || cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %q, Suspended condition %+v", j.Status.Phase, cond)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob + "=sus"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods of the job left", len(pods.Items))
		}
		return nil
	})

	setSuspend(t, c, ns, "sus", false)
	j := waitPhase(t, c, ns, "sus", v1alpha1.PhaseRunning, placerTimeout)
	if cond := meta.FindStatusCondition(j.Status.Conditions, controller.ConditionSuspended); cond == nil || cond.Reason != controller.ReasonResumed {
		t.Errorf("Suspended condition after resuming %+v", cond)
	}
	framework.Eventually(t, "the resumed job's worker and launcher bound", placerTimeout, func(ctx context.Context) error {
		b, p, err := jobPods(ctx, c, ns, "sus")
		if err != nil {
			return err
		}
		if len(b) != 2 || len(p) != 0 {
			return fmt.Errorf("%d bound, %d pending", len(b), len(p))
		}
		return nil
	})
}

// Two ranks of one slot each: rank 0 in the launcher, pinned on one node, rank 1 in the one
// worker, on another; the job succeeds and each rank runs on exactly its pod's pinned CPUs.
func TestMultiNodeLauncherRunsAsWorker(t *testing.T) {
	c := deployNodes(t)
	ns := c.Namespace(t)
	const name = "law"
	job := podNetworkMPIJob(name, 2, `mpirun sh -c 'echo "rank $OMPI_COMM_WORLD_RANK host $(hostname) cpus $(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)"'`)
	job.Spec.SlotsPerWorker, job.Spec.RunLauncherAsWorker = 1, true
	job.Spec.Worker.Spec.Volumes = nil
	job.Spec.Worker.Spec.Containers[0].VolumeMounts = nil
	createJob(t, c, ns, job)
	c.DumpOnFailure(t, ns)
	done := waitPhase(t, c, ns, name, v1alpha1.PhaseSucceeded, mpiTimeout)
	if done.Status.Workers != 1 || len(done.Status.Placements) != 1 {
		t.Errorf("status workers %d, placements %+v; want 1 worker besides the launcher", done.Status.Workers, done.Status.Placements)
	}
	logs := launcherLog(t, c, ns, name)
	for rank, host := range []string{v1alpha1.LauncherName(name), v1alpha1.WorkerName(name, 0)} {
		prefix := fmt.Sprintf("rank %d host %s cpus ", rank, host)
		i := strings.Index(logs, prefix)
		if i < 0 {
			t.Errorf("no rank %d in %s in the launcher's log:\n%s", rank, host, logs)
			continue
		}
		line, _, _ := strings.Cut(logs[i+len(prefix):], "\n")
		if cpus, err := cpuset.Parse(line); err != nil || cpus.Size() != 1 {
			t.Errorf("rank %d may run on CPUs %q, want the one exclusive CPU of its pod's pin", rank, line)
		}
	}
	launcher, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), v1alpha1.LauncherName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if launcher.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive || launcher.Annotations[v1alpha1.AnnotationNUMANode] == "" {
		t.Errorf("launcher labels %v, annotations %v: want pinned on a NUMA node the placer chose", launcher.Labels, launcher.Annotations)
	}
}
