package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer"
	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
	"github.com/finegrain-dev/finegrain/pkg/placer/objectives"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
)

// runLong is the help text of `placer run`.
const runLong = `Runs the placer against the cluster until SIGTERM: it binds the pods of HPCJobs and plain pod
gangs whose schedulerName is --scheduler-name, a whole job at a time, to nodes and NUMA nodes with
the free cores the node agents publish in their NodeResourceTopology objects, and runs the jobs'
MPI wiring (SSH identity, hostfile, launcher). With --leader-elect (the default) it takes the
Lease --leader-elect-resource-namespace/--leader-elect-resource-name first, as kube-scheduler
does, so that one replica places at a time. It serves /metrics, /healthz and /readyz (ready once
the leader's caches synced; a replica waiting on the Lease is ready at once) on --metrics-address
and logs JSON to stderr.`

// runOptions are the parsed flags of `placer run`.
type runOptions struct {
	placer   placer.Options
	logLevel slog.Level
}

// newRunCommand is `placer run`; start runs the placer with the parsed options and logs to stderr
// (runPlacer, or a test's recorder).
func newRunCommand(start func(opts runOptions, stderr io.Writer) error) *cobra.Command {
	opts := runOptions{placer: placer.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the placer against the cluster (leader-elected)",
		Long:  runLong,
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return start(opts, cmd.ErrOrStderr())
		},
	}
	addRunFlags(cmd.Flags(), &opts)
	return cmd
}

func addRunFlags(fs *pflag.FlagSet, o *runOptions) {
	opts, c := &o.placer, &o.placer.Controller
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	fs.Float32Var(&opts.KubeAPIQPS, "kube-api-qps", opts.KubeAPIQPS, "API requests per second")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", opts.KubeAPIBurst, "API request burst")
	fs.StringVar(&opts.MetricsAddress, "metrics-address", opts.MetricsAddress, "address serving /metrics, /healthz and /readyz (empty: off)")
	fs.BoolVar(&opts.Profiling, "profiling", opts.Profiling, "also serve Go's profiles under /debug/pprof/ on the metrics address")
	addLeaderElectionFlags(fs, opts)
	fs.StringVar(&c.SchedulerName, "scheduler-name", c.SchedulerName, "schedulerName of the pods the placer binds")
	fs.BoolVar(&c.TaskGroups, "task-groups", c.TaskGroups, "task-group scheduling: workers of a task group share a node, groups keep apart (false: every node scores alike, the job's placement policy alone picks each worker's node)")
	fs.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "concurrent API calls while binding")
	fs.DurationVar(&c.GangTimeout, "gang-timeout", c.GangTimeout, "timeout of plain pod gangs (HPCJobs set their own)")
	fs.DurationVar(&c.InitialBackoff, "initial-backoff", c.InitialBackoff, "wait after a gang's first failed attempt")
	fs.DurationVar(&c.MaxBackoff, "max-backoff", c.MaxBackoff, "longest wait between a gang's attempts")
	fs.DurationVar(&c.ChangeDelay, "change-delay", c.ChangeDelay, "least wait after a failure before a cluster change retries the gang")
	fs.DurationVar(&c.SnapshotTTL, "snapshot-ttl", c.SnapshotTTL, "how long one cluster snapshot serves consecutive gangs")
	fs.DurationVar(&c.AssumeTTL, "assume-ttl", c.AssumeTTL, "how long a bound pod the informer never shows is still assumed")
	fs.DurationVar(&c.ResyncPeriod, "resync-period", c.ResyncPeriod, "informer resync period")
	fs.DurationVar(&c.RefusalGrace, "refusal-grace", c.RefusalGrace, "how long a bound worker the node agent refused to pin may stay unpinned before its job is placed again")
	fs.DurationVar(&c.LauncherFailureGrace, "launcher-failure-grace", c.LauncherFailureGrace, "how long a failed launcher waits for a worker's failure to surface before the run is blamed on the launcher")
	fs.Func("ssh-port-range", fmt.Sprintf("sshd ports `FIRST-LAST` of workers on their node's network, each free on its node (default %s)", c.SSHPorts), func(v string) error {
		r, err := mpi.ParsePortRange(v)
		c.SSHPorts = r
		return err
	})
	fs.Func("shrink-scope", fmt.Sprintf("which elastic jobs a waiting gang of strictly higher priority may shrink: those of any namespace (`SCOPE` cluster), of its own (namespace) or none (default %s)", c.ShrinkScope), func(v string) error {
		s, err := priority.ParseScope(v)
		c.ShrinkScope = s
		return err
	})
	fs.Func("priority-aging", "`PRIORITY` a waiting gang gains per hour it has waited, in the queue's order and completeJob's alone (never to shrink another job); 0 is off (default 0)", func(v string) error {
		a, err := parseAging(v)
		c.Aging = a
		return err
	})
	fs.DurationVar(&c.ImagePullGrace, "image-pull-grace", c.ImagePullGrace, "how long a job's pod may fail to pull its image before the job fails (an image that can never be pulled fails it at once)")
	fs.Func("objective-query-urls", "base `URLs` of the Prometheus-compatible query APIs that ServiceObjectives may name in metric.source.query.url, comma-separated, the flag repeatable (an objective naming another gets Valid=False, reason SourceNotAllowed; default none: only the pods' own endpoints)", func(v string) error {
		for _, u := range strings.Split(v, ",") {
			if err := objectives.CheckAllowedQueryURL(u); err != nil {
				return err
			}
			opts.Objectives.AllowedQueryURLs = append(opts.Objectives.AllowedQueryURLs, u)
		}
		return nil
	})
	fs.IntVar(&opts.Objectives.Parallelism, "objective-parallelism", opts.Objectives.Parallelism, "service objectives measured and resized at once")
	fs.Func("slurm-port-range", fmt.Sprintf("ports `FIRST-LAST` of VirtualClusters' daemons on their nodes' network, 16 per virtual cluster, each block free on its nodes (default %s)", opts.VirtualClusters.Ports), func(v string) error {
		r, err := mpi.ParsePortRange(v)
		opts.VirtualClusters.Ports = r
		return err
	})
	sb := &opts.SlurmBridge
	fs.DurationVar(&sb.Interval, "slurm-bridge-interval", sb.Interval, "how often the Slurm delegation bridge reads each virtual cluster's jobs (squeue): how soon a new job is placed and an ended job's placeholders go (0: the bridge is off)")
	fs.BoolVar(&sb.ExclusiveNodes, "slurm-exclusive-nodes", sb.ExclusiveNodes, "keep Slurm jobs' placeholders off nodes of other HPC jobs, unless a job's comment says finegrain.exclusive=false")
	fs.Func("slurm-placement", fmt.Sprintf("`POLICY` of Slurm jobs' placeholders, least-loaded or most-loaded, unless a job's comment says finegrain.placement=... (default %s)", sb.Placement), func(v string) error {
		switch p := v1alpha1.PlacementPolicy(v); p {
		case v1alpha1.LeastLoaded, v1alpha1.MostLoaded:
			sb.Placement = p
			return nil
		}
		return fmt.Errorf("want least-loaded or most-loaded")
	})
	fs.StringVar(&sb.Image, "slurm-placeholder-image", sb.Image, "image of Slurm jobs' placeholder pods: anything that sleeps and stops at once on SIGTERM")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log `LEVEL`: debug, info, warn or error")
}

// parseAging reads --priority-aging: a priority per hour, finite and not negative.
func parseAging(v string) (elastic.Aging, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return elastic.Aging{}, fmt.Errorf("want a priority per hour, a number 0 or above (0: off), not %q", v)
	}
	return elastic.Aging{PerHour: f}, nil
}

// renamedLeaderElectionFlags pairs the placer's leader election flags before it took
// kube-scheduler's names with the names that replace them.
var renamedLeaderElectionFlags = []struct{ old, current string }{
	{"lease-duration", "leader-elect-lease-duration"},
	{"renew-deadline", "leader-elect-renew-deadline"},
	{"retry-period", "leader-elect-retry-period"},
	{"lease-namespace", "leader-elect-resource-namespace"},
	{"lease-name", "leader-elect-resource-name"},
}

// addLeaderElectionFlags registers kube-scheduler's leader election flags (as
// k8s.io/component-base names them; the Lease is the only lock) and the older names, which set the
// same options and warn that they are deprecated.
func addLeaderElectionFlags(fs *pflag.FlagSet, opts *placer.Options) {
	fs.BoolVar(&opts.LeaderElect, "leader-elect", opts.LeaderElect, "take a Lease before placing, so that one replica places at a time")
	fs.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", opts.LeaseDuration,
		"how long a replica waits after the leader's last renewal before it tries to take the Lease")
	fs.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", opts.RenewDeadline,
		"how long the leader tries to renew the Lease before it stops leading (less than the lease duration)")
	fs.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", opts.RetryPeriod, "wait between attempts to take or renew the Lease")
	fs.StringVar(&opts.LeaseNamespace, "leader-elect-resource-namespace", opts.LeaseNamespace,
		"namespace of the Lease (the default is $POD_NAMESPACE where it is set)")
	fs.StringVar(&opts.LeaseName, "leader-elect-resource-name", opts.LeaseName, "name of the Lease")
	for _, r := range renamedLeaderElectionFlags {
		current := fs.Lookup(r.current)
		fs.AddFlag(&pflag.Flag{Name: r.old, Usage: current.Usage, Value: current.Value, DefValue: current.DefValue})
		if err := fs.MarkDeprecated(r.old, "use --"+r.current+" instead"); err != nil {
			panic(err) // r.old was added just above
		}
	}
}

// runPlacer runs the placer until SIGTERM or SIGINT, logging JSON to stderr: nil after a clean
// shutdown, cli.ErrReported when it failed (its log says why).
func runPlacer(opts runOptions, stderr io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: opts.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := placer.Run(ctx, opts.placer, log); err != nil {
		log.Error("placer failed", "err", err)
		return cli.ErrReported
	}
	return nil
}
