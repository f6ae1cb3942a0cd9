package agent

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/blockdev"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/checkpoint"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
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
		Pods: restPods{core}, Topology: topo, Writer: writer, Processes: procs, Store: store, Log: log, Mover: writer,
		SlurmProcesses: func(pids []int) ([]slurm.Process, error) { return slurm.ReadProcesses(opts.ProcRoot, pids) },
		KubeletPolicy:  func() (kubeletpolicy.Result, error) { return kubelet.Check(context.Background()) },
	}
	if opts.NUMAHintPolicy != "" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("API client for the NUMA hint policy: %w", err)
		}
		d.NUMAHintGuard = HintPolicyGuard(dyn, opts.NUMAHintPolicy)
	}
	if err := wireIO(&d, opts, cfg, mounts, writer, log); err != nil {
		return nil, err
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

// wireIO finds the node's disks for the pods' I/O limits and connects the ServiceObjectives
// watch. A node where no disk is found, or a v1 host without a blkio hierarchy, runs without I/O
// limits and says why: the agent never refuses to start for them.
func wireIO(d *Deps, opts Options, cfg *rest.Config, mounts cgroup.Mounts, writer *cgroup.FS, log *slog.Logger) error {
	if len(opts.IODevicePaths) == 0 {
		return nil
	}
	if mounts.Root(cgroup.BlockIO) == "" {
		log.Warn("no cgroup v1 blkio hierarchy is mounted; pods get no I/O limits", "paths", opts.IODevicePaths)
		return nil
	}
	found, err := blockdev.Find(opts.IOMountinfo, opts.SysfsRoot, opts.IODevicePaths)
	if err != nil {
		log.Warn("cannot find the disks of the I/O device paths; pods get no I/O limits", "paths", opts.IODevicePaths, "reason", err.Error())
		return nil
	}
	for _, s := range found.Skipped {
		log.Warn("directory has no disk to limit I/O on", "path", s.Path, "reason", s.Reason)
	}
	for _, b := range found.Backings {
		part := ""
		if b.Partition != nil {
			part = b.Partition.String()
		}
		log.Info("I/O limits go on the disk of a directory", "path", b.Path, "mount", b.Mount, "fsType", b.FSType, "device", b.Device.String(), "partition", part)
	}
	if len(found.Devices) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client for ServiceObjectives: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client for the workloads of ServiceObjectives: %w", err)
	}
	d.IO, d.IODevices, d.Objectives = writer, found.Devices, NewObjectives(dyn, meta, log)
	return nil
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
