package vcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/clusterconf"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// upStates are the base states of a Slurm node that can run jobs.
var upStates = []string{"IDLE", "MIXED", "ALLOCATED", "COMPLETING"}

// observe fills the status's nodes and jobs from the pods and, when slurmctld runs, from sinfo
// and squeue in its pod, and says what the Ready condition is.
func (c *Controller) observe(ctx context.Context, vc *v1alpha1.VirtualCluster, status *v1alpha1.VirtualClusterStatus, nodes []*corev1.Node) (metav1.ConditionStatus, string, string) {
	status.Nodes = status.Nodes[:0]
	for _, n := range nodes {
		vn := v1alpha1.VirtualClusterNode{Name: n.Name, Pod: nodePodName(vc, n.Name)}
		if p, err := c.pods.Pods(vc.Namespace).Get(vn.Pod); err == nil && metav1.IsControlledBy(p, vc) {
			vn.PodReady = podReady(p)
		}
		status.Nodes = append(status.Nodes, vn)
	}
	ctl, err := c.pods.Pods(vc.Namespace).Get(ctlPodName(vc))
	if err != nil || !metav1.IsControlledBy(ctl, vc) || !podReady(ctl) {
		status.Jobs = nil
		return metav1.ConditionFalse, ReasonControllerNotReady, fmt.Sprintf("the slurmctld pod %s is not ready yet", ctlPodName(vc))
	}
	states, jobs, err := c.askSlurm(ctx, ctl)
	if err != nil {
		return metav1.ConditionFalse, ReasonSlurmctldUnreachable, err.Error()
	}
	status.Jobs = jobs
	var down []string
	for i := range status.Nodes {
		n := &status.Nodes[i]
		n.SlurmState = states[n.Name]
		base, flags, _ := strings.Cut(n.SlurmState, "+")
		switch {
		case !n.PodReady:
			down = append(down, fmt.Sprintf("%s's pod %s is not ready", n.Name, n.Pod))
		case !slices.Contains(upStates, base) || strings.Contains(flags, "DRAIN") || strings.Contains(flags, "NOT_RESPONDING"):
			down = append(down, fmt.Sprintf("%s is %s", n.Name, orUnknown(n.SlurmState)))
		}
	}
	if len(down) > 0 {
		return metav1.ConditionFalse, ReasonNodesNotReady, "waiting for Slurm's nodes: " + strings.Join(down, ", ")
	}
	return metav1.ConditionTrue, ReasonReady, fmt.Sprintf("slurmctld answers in pod %s and all %d nodes are up", ctl.Name, len(status.Nodes))
}

func orUnknown(s string) string {
	if s == "" {
		return "not known to slurmctld"
	}
	return s
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// askSlurm runs sinfo and squeue in the slurmctld pod.
func (c *Controller) askSlurm(ctx context.Context, ctl *corev1.Pod) (map[string]string, []v1alpha1.SlurmJob, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ExecTimeout)
	defer cancel()
	out, err := c.exec.Exec(ctx, ctl, layout.RoleSlurmctld, []string{"sinfo", "--json"})
	if err != nil {
		return nil, nil, fmt.Errorf("sinfo --json in pod %s/%s: %w", ctl.Namespace, ctl.Name, err)
	}
	states, err := clusterconf.ParseNodeStates(out)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", ctl.Namespace, ctl.Name, err)
	}
	out, err = c.exec.Exec(ctx, ctl, layout.RoleSlurmctld, []string{"squeue", "--json"})
	if err != nil {
		return nil, nil, fmt.Errorf("squeue --json in pod %s/%s: %w", ctl.Namespace, ctl.Name, err)
	}
	parsed, err := slurm.ParseJobs(out)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", ctl.Namespace, ctl.Name, err)
	}
	var jobs []v1alpha1.SlurmJob
	for _, j := range parsed[:min(len(parsed), v1alpha1.MaxStatusJobs)] {
		jobs = append(jobs, statusJob(j))
	}
	return states, jobs, nil
}

// finish sets the Ready condition and writes the status when it changed.
func (c *Controller) finish(ctx context.Context, vc *v1alpha1.VirtualCluster, status *v1alpha1.VirtualClusterStatus, ready metav1.ConditionStatus, reason, msg string) error {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.VirtualClusterReady, Status: ready, Reason: reason, Message: msg, ObservedGeneration: vc.Generation})
	if reflect.DeepEqual(*status, vc.Status) {
		return nil
	}
	old := meta.FindStatusCondition(vc.Status.Conditions, v1alpha1.VirtualClusterReady)
	if old == nil || old.Status != ready || old.Reason != reason {
		eventType := corev1.EventTypeNormal
		if ready != metav1.ConditionTrue && reason != ReasonControllerNotReady && reason != ReasonNodesNotReady {
			eventType = corev1.EventTypeWarning
		}
		c.recorder.Eventf(eventObject(vc), nil, eventType, reason, "Reconcile", "%s", msg)
		c.log.Info("virtual cluster", "virtualCluster", vc.Namespace+"/"+vc.Name, "ready", ready, "reason", reason, "message", msg)
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(v1alpha1.VirtualClusterGroupVersionResource).Namespace(vc.Namespace).
		Patch(ctx, vc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("write status of VirtualCluster %s/%s: %w", vc.Namespace, vc.Name, err)
	}
	return nil
}

// statusJob is a job as status.jobs shows it; Slurm's reason None is left out.
func statusJob(j slurm.Job) v1alpha1.SlurmJob {
	reason := j.Reason
	if reason == "None" {
		reason = ""
	}
	return v1alpha1.SlurmJob{ID: int64(j.ID), Name: j.Name, State: string(j.State), Partition: j.Partition, Nodes: j.NodeList, Reason: reason}
}
