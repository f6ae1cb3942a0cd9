package pods

import (
	"fmt"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
)

// Options configure a run on a cluster: the scenario settings of package pinning (its Worker is
// unused: the pods run the fgworker of Image) and where the cluster and its agent are.
type Options struct {
	pinning.Options
	// Kubeconfig is an admin kubeconfig; Kubectl the kubectl that applies Overlay, the
	// kustomization that deploys the node agent when it is not deployed.
	Kubeconfig, Kubectl, Overlay string
	// Node is the node this program runs on (empty: the cluster's only node).
	Node string
	// Image holds fgworker; it is never pulled.
	Image string
	// KubeletRoot is the kubelet's root directory, below which its pod-resources API tells its CPU
	// manager policy.
	KubeletRoot string
	// AgentNamespace and AgentName name the node agent's DaemonSet.
	AgentNamespace, AgentName string
	// StartLead is how long after the worker pods are created their ranks start timing together:
	// enough to start the pods, pin them and set the ranks up. PodTimeout bounds every other
	// wait (a pod starting, finishing after the start, going away; the agent coming and going).
	StartLead, PodTimeout time.Duration
}

// Validate checks the options make sense together.
func (o Options) Validate() error {
	if err := o.Options.ValidateSettings(); err != nil {
		return err
	}
	switch {
	case o.Kubeconfig == "" || o.Kubectl == "" || o.Overlay == "":
		return fmt.Errorf("a run on a cluster needs -kubeconfig, -kubectl and -overlay")
	case o.Image == "":
		return fmt.Errorf("no worker image: pass -image (the local cluster's is localhost/finegrain-worker:dev)")
	case o.KubeletRoot == "":
		return fmt.Errorf("no kubelet root directory: pass -kubelet-root (the local cluster's is /var/lib/finegrain-cluster/kubelet)")
	case o.AgentNamespace == "" || o.AgentName == "":
		return fmt.Errorf("name the node agent's DaemonSet with -agent-namespace and -agent-daemonset")
	case o.StartLead < time.Second || o.PodTimeout < time.Second:
		return fmt.Errorf("-start-lead %v and -pod-timeout %v: give the pods at least a second", o.StartLead, o.PodTimeout)
	case o.StartLead < o.NoiseWarmup:
		return fmt.Errorf("-start-lead %v is shorter than -noise-warmup %v", o.StartLead, o.NoiseWarmup)
	}
	return nil
}
