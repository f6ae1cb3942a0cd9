package agent

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/checkpoint"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// EventComponent is the source component of the agent's events.
const EventComponent = "finegrain-nodeagent"

// New builds an agent on this host: it discovers the topology, locates the kubelet's cgroups,
// connects to the API server and the CRI runtime and prepares the inotify watcher. Close
// releases what it opened.
func New(opts Options, log *slog.Logger) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	topo, err := topology.Discover(opts.SysfsRoot)
	if err != nil {
		return nil, fmt.Errorf("discover the CPU topology under %s: %w", opts.SysfsRoot, err)
	}
	mounts, err := cgroup.DetectMounts(opts.Mountinfo)
	if err != nil {
		return nil, fmt.Errorf("locate the cgroup hierarchies: %w", err)
	}
	layout, err := cgroup.NewLayout(mounts, opts.CgroupDriver, opts.CgroupBase)
	if err != nil {
		return nil, fmt.Errorf("kubelet cgroup layout: %w", err)
	}
	writer, err := cgroup.NewFS(layout, log)
	if err != nil {
		return nil, err
	}
	procs, err := cgroup.NewProcessReader(layout, opts.ProcRoot)
	if err != nil {
		return nil, err
	}
	store, err := checkpoint.New(opts.CheckpointPath)
	if err != nil {
		return nil, err
	}
	cfg, err := RESTConfig(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	core, err := newCoreClient(cfg)
	if err != nil {
		return nil, err
	}
	kubelet, err := kubeletpolicy.Dial(opts.KubeletRootDir, opts.CRITimeout)
	if err != nil {
		return nil, err
	}
	closers := []func(){func() { kubelet.Close() }}
	d := Deps{
		Pods: restPods{core}, Topology: topo, Writer: writer, Processes: procs, Store: store, Log: log,
		KubeletPolicy: func() (kubeletpolicy.Result, error) { return kubelet.Check(context.Background()) },
	}
	if opts.NUMAHintPolicy != "" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("API client for the NUMA hint policy: %w", err)
		}
		d.NUMAHintGuard = HintPolicyGuard(dyn, opts.NUMAHintPolicy)
	}
	if opts.CRIEndpoint != "" {
		c, err := cri.Dial(opts.CRIEndpoint, opts.CRITimeout)
		if err != nil {
			return nil, err
		}
		d.Resolver = c
		closers = append(closers, func() { c.Close() })
	}
	if opts.Inotify {
		d.Watcher = cgwatch.New(layout, log)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(restEvents{core})
	closers = append(closers, broadcaster.Shutdown)
	d.Recorder = broadcaster.NewRecorder(core.scheme, corev1.EventSource{Component: EventComponent, Host: opts.NodeName})
	a, err := NewFromDeps(opts, d)
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	a.closers = closers
	log.Info("node agent configured", "node", opts.NodeName, "cgroup", mounts.Version.String(), "driver", string(opts.CgroupDriver),
		"kubepods", layout.KubepodsDir(cgroup.CPUSet), "cpus", topo.OnlineCPUs.String(), "numaNodes", len(topo.NUMANodes),
		"inotify", opts.Inotify, "cri", opts.CRIEndpoint, "checkpoint", store.Path())
	return a, nil
}

// Close releases the connections New opened.
func (a *Agent) Close() {
	for _, c := range a.closers {
		c()
	}
}

// RESTConfig returns the API server configuration of a kubeconfig file, or of the pod's service
// account when kubeconfig is empty.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("API server configuration (kubeconfig %q, empty for in-cluster): %w", kubeconfig, err)
	}
	cfg.UserAgent = EventComponent
	return cfg, nil
}
