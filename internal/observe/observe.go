// Package observe reads what the cluster and the container runtime report about pods and
// containers, for the end-to-end tests and the benchmarks that drive the local cluster. It only
// reads and formats; it never changes a pod, a container or a cgroup.
package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PodSummary describes a pod's phase and container states on one line.
func PodSummary(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s: %s)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Running != nil:
			parts = append(parts, s.Name+" running")
		case s.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated (exit %d, %s)", s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Reason))
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// SpecCPUs returns the cpuset containerd holds in a container's runtime spec — what an NRI
// adjustment or update made it (the agent's cgroup writes do not change it) — asking `ctr
// containers info` on the containerd at address, namespace k8s.io.
func SpecCPUs(ctx context.Context, ctr, address, id string) (string, error) {
	out, err := exec.CommandContext(ctx, ctr, "--address", address, "--namespace", "k8s.io", "containers", "info", id).Output()
	if err != nil {
		return "", fmt.Errorf("%s containers info %s: %w", ctr, id, err)
	}
	cpus, err := specCPUs(out)
	if err != nil {
		return "", fmt.Errorf("%s containers info %s: %w", ctr, id, err)
	}
	return cpus, nil
}

// specCPUs decodes the cpuset of the runtime spec in ctr's containers info output.
func specCPUs(info []byte) (string, error) {
	var v struct {
		Spec struct {
			Linux struct {
				Resources struct {
					CPU struct {
						Cpus string `json:"cpus"`
					} `json:"cpu"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"Spec"`
	}
	if err := json.Unmarshal(info, &v); err != nil {
		return "", fmt.Errorf("decode containers info: %w", err)
	}
	return v.Spec.Linux.Resources.CPU.Cpus, nil
}
