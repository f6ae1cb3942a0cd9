package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/report"
)

// runLong is the help text of `nodeagent run`.
const runLong = `Runs the node agent on this node (normally as the finegrain DaemonSet): containers of pods
labelled finegrain.dev/pinning=exclusive get exclusive cores of one NUMA node for their integer
CPU request, every other container under kubepods runs in the shared pool with the configured
CPU quota and memory limit, drift is repaired every --reconcile-interval, and the state survives
restarts in --checkpoint. Where the runtime offers NRI (containerd >= 2.0) it decides each
container's CPUs at its creation (--nri), otherwise it watches new cgroups with inotify. It
refuses to act next to a kubelet running the static CPU manager policy. It serves /healthz,
/readyz, /metrics, /pins and /processes on --inspect-address and publishes the node's
NodeResourceTopology object (--publish-nrt).`

// runOptions are the parsed flags of `nodeagent run`.
type runOptions struct {
	agent     agent.Options
	reporting reportingOptions
	nri       nriOptions
	logLevel  slog.Level
	logJSON   bool
}

// runFlags are the flags of `nodeagent run` as given; options checks and converts them.
type runFlags struct {
	opts                                            runOptions
	driver, reserved, cpuQuota, memLimit, logFormat string
	period                                          time.Duration
}

// newRunCommand is `nodeagent run`: getenv supplies the default node name, start runs the agent
// with the parsed options and writes its log to stderr (runAgent, or a test's recorder).
func newRunCommand(getenv func(string) string, start func(opts runOptions, stderr io.Writer) error) *cobra.Command {
	f := &runFlags{opts: runOptions{agent: agent.DefaultOptions()}}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the node agent: pin opted-in containers, keep the rest in the shared pool, repair drift",
		Long:  runLong,
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return cli.Usage(err)
			}
			return start(opts, cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags(), getenv)
	return cmd
}

func (f *runFlags) register(fs *pflag.FlagSet, getenv func(string) string) {
	a := &f.opts.agent
	fs.StringVar(&a.NodeName, "node-name", getenv("NODE_NAME"), "this node's name (default $NODE_NAME, set from spec.nodeName)")
	fs.StringVar(&a.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses the pod's service account")
	fs.StringVar(&a.SysfsRoot, "sysfs-root", a.SysfsRoot, "where the host's /sys is mounted")
	fs.StringVar(&a.Mountinfo, "mountinfo", a.Mountinfo, "mount table that locates the cgroup hierarchies")
	fs.StringVar(&a.ProcRoot, "proc-root", a.ProcRoot, "procfs of the host's PID namespace (the agent runs with hostPID), read to list pinned containers' processes")
	fs.StringVar(&f.driver, "cgroup-driver", string(a.CgroupDriver), "the kubelet's cgroupDriver: cgroupfs or systemd")
	fs.StringVar(&a.CgroupBase, "cgroup-root", "", "the kubelet's cgroupRoot, without the leading slash (empty for /)")
	fs.StringVar(&a.KubeletRootDir, "kubelet-root-dir", a.KubeletRootDir, "the kubelet's --root-dir: the agent asks the pod-resources API below it whether the kubelet pins containers itself (static policy)")
	fs.StringVar(&a.CRIEndpoint, "cri-endpoint", a.CRIEndpoint, "the container runtime's CRI socket, to name new containers; empty names them from pod statuses only")
	fs.DurationVar(&a.CRITimeout, "cri-timeout", a.CRITimeout, "limit of one CRI call")
	fs.StringVar(&a.CheckpointPath, "checkpoint", a.CheckpointPath, "the agent's state file, on a host path")
	fs.StringVar(&f.reserved, "reserved-cpus", "", "CPUs never given to pods, in kernel list format (the kubelet's reservedSystemCPUs)")
	fs.IntVar(&a.MinSharedCPUs, "min-shared-cpus", a.MinSharedCPUs, "smallest shared pool; exclusive requests that would shrink it further wait")
	fs.BoolVar(&a.AllowSplitCores, "allow-split-cores", false, "let an exclusive container share a physical core (SMT sibling) with another")
	fs.StringVar(&a.Classify.PlacerSchedulerName, "placer-scheduler-name", a.Classify.PlacerSchedulerName, "schedulerName of pods the placer binds (only they may carry "+classify.AnnotationNUMANode+")")
	fs.StringVar(&a.NUMAHintPolicy, "numa-hint-policy", a.NUMAHintPolicy, "the ValidatingAdmissionPolicy (and binding) that lets only the placer write "+classify.AnnotationNUMANode+"; hints are honoured only while it is in force (empty: trust hints on every pod naming the placer, for clusters without the policy)")
	fs.StringVar(&f.cpuQuota, "shared-cpu-quota", string(a.Classify.CPUQuota), "CPU quota of shared containers: off (the kubelet's), limit (their CPU limit) or request (their CPU request)")
	fs.StringVar(&f.memLimit, "shared-memory-limit", string(a.Classify.MemoryLimit), "memory limit of shared containers: off, limit or request")
	fs.DurationVar(&f.period, "cpu-cfs-period", time.Duration(a.Classify.CPUPeriodUS)*time.Microsecond, "CFS period of the shared CPU quota (the kubelet's cpuCFSQuotaPeriod)")
	fs.StringSliceVar(&a.IODevicePaths, "io-device-paths", a.IODevicePaths, "host directories whose whole disks carry the pods' I/O bandwidth limits from ServiceObjectives (the kubelet's and the runtime's storage); empty turns I/O limits off")
	fs.StringVar(&a.IOMountinfo, "io-mountinfo", a.IOMountinfo, "the host's mount table, to find the disks of --io-device-paths (the DaemonSet runs with hostPID, so /proc/1/mountinfo is the host's)")
	fs.BoolVar(&a.Inotify, "inotify", a.Inotify, "notice new container cgroups through inotify (false: pod statuses and the periodic scan only)")
	fs.DurationVar(&a.ReconcileInterval, "reconcile-interval", a.ReconcileInterval, "period of the drift check")
	fs.DurationVar(&a.FullResyncInterval, "full-resync-interval", a.FullResyncInterval, "period at which quotas and memory limits are re-applied too")
	fs.DurationVar(&a.SlurmConfineInterval, "slurm-confine-interval", a.SlurmConfineInterval, "period at which Slurm jobs' processes are confined to their placeholders besides every reconcile tick (a new step's tasks wait for it; at or above --reconcile-interval the ticks alone confine)")
	fs.DurationVar(&a.KubeletCheckInterval, "kubelet-check-interval", a.KubeletCheckInterval, "period at which the kubelet's CPU manager policy is re-read")
	fs.DurationVar(&a.StartupAPITimeout, "startup-api-timeout", a.StartupAPITimeout, "wait at most this long for the pod list at start, then enforce from the checkpoint")
	addReportingFlags(fs, &f.opts.reporting)
	addNRIFlags(fs, &f.opts.nri)
	fs.TextVar(&f.opts.logLevel, "log-level", slog.LevelInfo, "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or text")
}

// options checks the flags and returns the options they make.
func (f *runFlags) options() (runOptions, error) {
	o := f.opts
	a := &o.agent
	var err error
	if a.CgroupDriver, err = cgroup.ParseDriver(f.driver); err != nil {
		return o, fmt.Errorf("--cgroup-driver: %w", err)
	}
	if a.ReservedCPUs, err = cpulist.Parse(f.reserved); err != nil {
		return o, fmt.Errorf("--reserved-cpus: %w", err)
	}
	if a.Classify.CPUQuota, err = classify.ParsePolicy(f.cpuQuota); err != nil {
		return o, fmt.Errorf("--shared-cpu-quota: %w", err)
	}
	if a.Classify.MemoryLimit, err = classify.ParsePolicy(f.memLimit); err != nil {
		return o, fmt.Errorf("--shared-memory-limit: %w", err)
	}
	if f.period%time.Microsecond != 0 || f.period <= 0 {
		return o, fmt.Errorf("--cpu-cfs-period %s: want a positive whole number of microseconds", f.period)
	}
	a.Classify.CPUPeriodUS = uint64(f.period / time.Microsecond)
	if err := o.nri.plugin.Validate(); err != nil {
		return o, fmt.Errorf("--nri-*: %w", err)
	}
	switch f.logFormat {
	case "json", "text":
		o.logJSON = f.logFormat == "json"
	default:
		return o, fmt.Errorf("--log-format %q: want json or text", f.logFormat)
	}
	return o, a.Validate()
}

// runAgent runs the agent until SIGTERM or SIGINT, logging to stderr: nil after a clean
// shutdown, cli.ErrReported when the agent could not run (its log says why).
func runAgent(opts runOptions, stderr io.Writer) error {
	hopts := &slog.HandlerOptions{Level: opts.logLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if opts.logJSON {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(h)
	klog.SetSlogLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, opts, log); err != nil {
		log.Error("node agent stopped", "reason", err.Error())
		return cli.ErrReported
	}
	log.Info("node agent stopped")
	return nil
}

// serve runs the agent with its reporting (metrics, inspection endpoint, NodeResourceTopology
// publisher) until ctx ends.
func serve(ctx context.Context, opts runOptions, log *slog.Logger) error {
	rep, err := newReporting(opts.reporting, log)
	if err != nil {
		return err
	}
	opts.agent.Hooks = rep.hooks()
	useNRI := selectPath(&opts, log)
	a, err := agent.New(opts.agent, log)
	if err != nil {
		return err
	}
	defer a.Close()
	cfg, err := agent.RESTConfig(opts.agent.Kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic API client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plugged, err := runNRI(ctx, opts.nri, useNRI, a, rep.registry, log)
	if err != nil {
		return err
	}
	reported := make(chan error, 1)
	go func() {
		err := rep.run(ctx, a, opts.agent.NodeName, dyn, a.Topology(), report.Options{WholeCores: !opts.agent.AllowSplitCores, MinSharedCPUs: opts.agent.MinSharedCPUs})
		if err != nil {
			cancel()
		}
		reported <- err
	}()
	err = a.Run(ctx)
	cancel()
	return errors.Join(err, <-reported, <-plugged)
}
