//go:build e2e

// Elastic jobs on the real cluster (issue 18): a job with a rescale hook is shrunk, through the
// hook, for a job of higher priority, and grows back through the hook when that job ends. It runs
// in the multi-node pass: a single node of this machine offers one exclusive CPU, and a job that
// can give one worker up needs two.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// rescaleLog is where the elastic job's exec hook appends each request; its launcher follows the
// file, so the requests are in the launcher's log.
const rescaleLog = "/tmp/rescale.log"

// An elastic job with an exec rescale hook fills every exclusive CPU of the nodes. A rigid job of
// higher priority then needs one: the placer publishes the smaller hostfile, runs the hook in the
// launcher (the request on its standard input), and deletes the leaving worker only after the
// hook's acknowledgement; the rigid job runs and ends; the placer binds a new worker, waits for
// it to be Ready, publishes the full hostfile and runs the hook again. Each call and each
// acknowledgement is an event of the job, and the launcher saw both requests.
func TestMultiNodeElasticRescaleHook(t *testing.T) {
	c := deployNodes(t)
	ctx := context.Background()
	slots := 0
	for _, n := range c.Nodes {
		obj, err := nodeTopology(ctx, c, n.Name)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := nrt.AttributeValue(obj.Attributes, nrt.AttrExclusiveAvailable)
		k, _ := strconv.Atoi(v)
		slots += k
	}
	if slots < 2 {
		t.Skipf("the nodes offer %d exclusive CPU in all; an elastic job that gives one worker up needs two", slots)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "finegrain-e2e-urgent"}, Value: 1000}
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	ns := c.Namespace(t)
	c.DumpOnFailure(t, ns)

	el := podNetworkMPIJob("el", slots, fmt.Sprintf("touch %s && exec tail -f %s", rescaleLog, rescaleLog))
	el.Spec.Worker.Spec.Volumes, el.Spec.Worker.Spec.Containers[0].VolumeMounts = nil, nil
	el.Spec.Elastic = &v1alpha1.Elastic{MinReplicas: 1, MaxReplicas: int32(slots), RescaleGapSeconds: 1,
		RescaleHook: &v1alpha1.RescaleHook{TimeoutSeconds: 30, Exec: &v1alpha1.ExecRescaleHook{
			Command: []string{"sh", "-c", fmt.Sprintf("cat >> %s && echo >> %s", rescaleLog, rescaleLog)}}}}
	createJob(t, c, ns, el)
	waitJob(t, c, ns, "el", "the elastic job running with all its workers and its launcher", func(j *v1alpha1.HPCJob) bool {
		return j.Status.Phase == v1alpha1.PhaseRunning && j.Status.Workers == int32(slots) && j.Status.LauncherCreationTime != nil
	})
	framework.Eventually(t, "the elastic job's launcher to run", placerTimeout, func(ctx context.Context) error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, v1alpha1.LauncherName("el"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("launcher %s, address %q", p.Status.Phase, p.Status.PodIP)
		}
		return nil
	})

	urgent := podNetworkMPIJob("urgent", 1, "sleep 2")
	urgent.Spec.Worker.Spec.Volumes, urgent.Spec.Worker.Spec.Containers[0].VolumeMounts = nil, nil
	urgent.Spec.PriorityClassName = pc.Name
	createJob(t, c, ns, urgent)
	waitJob(t, c, ns, "el", "the elastic job shrunk by one worker", func(j *v1alpha1.HPCJob) bool { return j.Status.Workers == int32(slots-1) })
	waitJob(t, c, ns, "urgent", "the urgent job to run and end", func(j *v1alpha1.HPCJob) bool { return j.Status.Phase == v1alpha1.PhaseSucceeded })
	job := waitJob(t, c, ns, "el", "the elastic job grown back", func(j *v1alpha1.HPCJob) bool { return j.Status.Workers == int32(slots) })
	if job.Status.Phase != v1alpha1.PhaseRunning || len(job.Status.Placements) != slots {
		t.Errorf("elastic job after growing back: %s with %d placements", job.Status.Phase, len(job.Status.Placements))
	}

	shrink := fmt.Sprintf("shrink from %d to %d workers", slots, slots-1)
	expand := fmt.Sprintf("expand from %d to %d workers", slots-1, slots)
	framework.Eventually(t, "the hook's calls and acknowledgements in the job's events", time.Minute, func(ctx context.Context) error {
		events, err := podEvents(ctx, c, ns, "el")
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range events {
			seen = append(seen, e.Reason+": "+e.Message)
		}
		all := strings.Join(seen, "\n")
		for _, want := range []string{
			controller.ReasonRescaleHookCalled + ": published the hostfile of " + strconv.Itoa(slots-1) + " workers; calling the rescale hook (exec",
			controller.ReasonRescaleAcknowledged + ": the rescale hook acknowledged: " + shrink,
			controller.ReasonRescaleHookCalled + ": published the hostfile of " + strconv.Itoa(slots) + " workers; calling the rescale hook (exec",
			controller.ReasonRescaleAcknowledged + ": the rescale hook acknowledged: " + expand,
		} {
			if !strings.Contains(all, want) {
				return fmt.Errorf("no event %q among:\n%s", want, all)
			}
		}
		return nil
	})
	framework.Eventually(t, "both requests in the launcher's log", time.Minute, func(ctx context.Context) error {
		raw, err := c.Client.CoreV1().Pods(ns).GetLogs(v1alpha1.LauncherName("el"), &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		var got []v1alpha1.RescaleRequest
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var r v1alpha1.RescaleRequest
			if json.Unmarshal([]byte(line), &r) == nil && r.Job != "" {
				got = append(got, r)
			}
		}
		if len(got) != 2 || got[0].Direction != v1alpha1.RescaleShrink || got[1].Direction != v1alpha1.RescaleExpand ||
			len(got[0].Workers) != slots-1 || len(got[1].Workers) != slots || got[1].Job != ns+"/el" {
			return fmt.Errorf("requests %+v in the launcher's log:\n%s", got, raw)
		}
		return nil
	})
}

// waitJob waits until a job's status satisfies ok and returns it.
func waitJob(t *testing.T, c *framework.Cluster, ns, name, what string, ok func(*v1alpha1.HPCJob) bool) *v1alpha1.HPCJob {
	t.Helper()
	var job *v1alpha1.HPCJob
	framework.Eventually(t, what, placerTimeout, func(ctx context.Context) error {
		var err error
		if job, err = getJob(ctx, c, ns, name); err != nil {
			return err
		}
		if !ok(job) {
			return fmt.Errorf("status %+v", job.Status)
		}
		return nil
	})
	return job
}
