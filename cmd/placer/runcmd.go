package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer"
)

// runRun is `placer run`: flags into placer.Options, then placer.Run until SIGTERM.
func runRun(args []string, _, stderr io.Writer) int {
	opts := placer.DefaultOptions()
	c := &opts.Controller
	var level slog.Level
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	qps := float64(opts.KubeAPIQPS)
	fs.Float64Var(&qps, "kube-api-qps", qps, "API requests per second")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", opts.KubeAPIBurst, "API request burst")
	fs.StringVar(&opts.MetricsAddress, "metrics-address", opts.MetricsAddress, "address serving /metrics and /healthz (empty: off)")
	fs.BoolVar(&opts.Profiling, "profiling", opts.Profiling, "also serve Go's profiles under /debug/pprof/ on the metrics address")
	fs.BoolVar(&opts.LeaderElect, "leader-elect", opts.LeaderElect, "take a Lease so that one replica places at a time")
	fs.StringVar(&opts.LeaseNamespace, "lease-namespace", opts.LeaseNamespace, "namespace of the Lease (default $POD_NAMESPACE)")
	fs.StringVar(&opts.LeaseName, "lease-name", opts.LeaseName, "name of the Lease")
	fs.DurationVar(&opts.LeaseDuration, "lease-duration", opts.LeaseDuration, "how long a Lease lasts without renewal")
	fs.DurationVar(&opts.RenewDeadline, "renew-deadline", opts.RenewDeadline, "how long the leader tries to renew before giving up")
	fs.DurationVar(&opts.RetryPeriod, "retry-period", opts.RetryPeriod, "wait between Lease attempts")
	fs.StringVar(&c.SchedulerName, "scheduler-name", c.SchedulerName, "schedulerName of the pods the placer binds")
	fs.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "concurrent API calls while binding")
	fs.DurationVar(&c.GangTimeout, "gang-timeout", c.GangTimeout, "timeout of plain pod gangs (HPCJobs set their own)")
	fs.DurationVar(&c.InitialBackoff, "initial-backoff", c.InitialBackoff, "wait after a gang's first failed attempt")
	fs.DurationVar(&c.MaxBackoff, "max-backoff", c.MaxBackoff, "longest wait between a gang's attempts")
	fs.DurationVar(&c.ChangeDelay, "change-delay", c.ChangeDelay, "least wait after a failure before a cluster change retries the gang")
	fs.DurationVar(&c.SnapshotTTL, "snapshot-ttl", c.SnapshotTTL, "how long one cluster snapshot serves consecutive gangs")
	fs.DurationVar(&c.AssumeTTL, "assume-ttl", c.AssumeTTL, "how long a bound pod the informer never shows is still assumed")
	fs.DurationVar(&c.ResyncPeriod, "resync-period", c.ResyncPeriod, "informer resync period")
	fs.DurationVar(&c.RefusalGrace, "refusal-grace", c.RefusalGrace, "how long a bound worker the node agent refused to pin may stay unpinned before its job is placed again")
	fs.Func("ssh-port-range", fmt.Sprintf("FIRST-LAST: sshd ports of workers on their node's network, each free on its node (default %s)", c.SSHPorts), func(v string) error {
		r, err := mpi.ParsePortRange(v)
		c.SSHPorts = r
		return err
	})
	fs.DurationVar(&c.ImagePullGrace, "image-pull-grace", c.ImagePullGrace, "how long a job's pod may fail to pull its image before the job fails (an image that can never be pulled fails it at once)")
	fs.TextVar(&level, "log-level", slog.LevelInfo, "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts.KubeAPIQPS = float32(qps)
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "run takes no arguments, got %q\n", fs.Args())
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := placer.Run(ctx, opts, log); err != nil {
		log.Error("placer failed", "err", err)
		return 1
	}
	return 0
}
