package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/metrics"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// reportingOptions are the flags of the reporting side of `nodeagent run`.
type reportingOptions struct {
	inspectAddress string
	metricsAddress string
	publishNRT     bool
}

func addReportingFlags(fs *pflag.FlagSet, o *reportingOptions) {
	fs.StringVar(&o.inspectAddress, "inspect-address", inspect.DefaultAddress,
		"host:port serving /metrics, /healthz, /readyz, /pins and /processes (read-only; loopback only by default)")
	fs.StringVar(&o.metricsAddress, "metrics-address", "",
		"host:port serving /metrics alone, for a cluster's Prometheus (the DaemonSet: :9721); empty: /metrics on --inspect-address only")
	fs.BoolVar(&o.publishNRT, "publish-nrt", true, "publish the node's free-core map as a NodeResourceTopology object")
}

// reporting is what surrounds one agent: Prometheus metrics fed by its hooks, the
// NodeResourceTopology publisher and the inspection server. newReporting comes before
// agent.New (the hooks go into agent.Options), run after it.
type reporting struct {
	opts     reportingOptions
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics.Agent
}

// agentPaths, agentErrorReasons and agentIOWrites are created at zero in the metrics.
var (
	agentPaths        = []agent.Path{agent.PathInotify, agent.PathInformer, agent.PathScan, agent.PathStartup, agent.PathDecide}
	agentErrorReasons = []agent.ErrorReason{agent.ErrAllocate, agent.ErrCgroupWrite, agent.ErrVanished, agent.ErrEnumerate,
		agent.ErrResolve, agent.ErrCheckpoint, agent.ErrKubeletPolicy, agent.ErrKubeletState, agent.ErrIOLimit,
		agent.ErrSlurmNoPlaceholder, agent.ErrSlurmConfine}
	agentIOWrites = []agent.IOWrite{agent.IOSet, agent.IOCleared, agent.IORepaired}
)

func newReporting(opts reportingOptions, log *slog.Logger) (*reporting, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register Go runtime metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register process metrics: %w", err)
	}
	var labels metrics.Labels
	for _, p := range agentPaths {
		labels.Paths = append(labels.Paths, string(p))
	}
	for _, r := range agentErrorReasons {
		labels.ErrorReasons = append(labels.ErrorReasons, string(r))
	}
	for _, w := range agentIOWrites {
		labels.IOWrites = append(labels.IOWrites, string(w))
	}
	m, err := metrics.NewAgent(reg, labels)
	if err != nil {
		return nil, err
	}
	return &reporting{opts: opts, log: log, registry: reg, metrics: m}, nil
}

// hooks returns what agent.Options.Hooks must be.
func (r *reporting) hooks() agent.Hooks { return agentHooks{r.metrics} }

// run serves the inspection endpoint and publishes the NodeResourceTopology of agent a until ctx
// ends. client reaches the API server (dynamic.NewForConfig of the agent's configuration), topo
// is the agent's topology and opts shape the published numbers (WholeCores unless the agent lets
// requests split cores, the agent's MinSharedCPUs). It returns early only when the endpoint cannot
// listen.
func (r *reporting) run(ctx context.Context, a *agent.Agent, nodeName string, client dynamic.Interface, topo *topology.Topology, opts report.Options) error {
	changes, unsubscribe := a.Subscribe()
	defer unsubscribe()
	src := agentSource{a: a, changes: changes}
	if err := r.registry.Register(metrics.NewState(src, opts)); err != nil {
		return fmt.Errorf("register state metrics: %w", err)
	}
	var pub *report.Publisher
	if r.opts.publishNRT {
		var err error
		pub, err = report.NewPublisher(report.PublisherConfig{
			Client: client, NodeName: nodeName, Topology: topo, Source: src, Options: opts,
			Logger: r.log, Observer: r.metrics,
		})
		if err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	running := 0
	if pub != nil {
		running++
		go func() { errc <- pub.Run(ctx) }()
	}
	if r.opts.inspectAddress != "" {
		srv, err := inspect.New(inspect.Config{
			Address:  r.opts.inspectAddress,
			Gatherer: r.registry,
			Pins:     func() inspect.Pins { return pinsView(nodeName, src, opts, pub) },
			Processes: func(pods []types.NamespacedName) (inspect.Processes, error) {
				return processesView(nodeName, a, pods)
			},
			Health: []inspect.Check{{Name: "agent-loop", Run: func(context.Context) error { return a.Healthy() }}},
			Ready:  []inspect.Check{{Name: "agent", Run: func(context.Context) error { return a.Ready() }}},
			Logger: r.log,
		})
		if err != nil {
			return err
		}
		running++
		go func() { errc <- srv.Run(ctx) }()
	}
	if r.opts.metricsAddress != "" {
		srv, err := inspect.NewMetrics(inspect.Config{Address: r.opts.metricsAddress, Gatherer: r.registry, Logger: r.log})
		if err != nil {
			return err
		}
		running++
		go func() { errc <- srv.Run(ctx) }()
	}
	var first error
	for range running {
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

func pinsView(node string, src agentSource, opts report.Options, pub *report.Publisher) inspect.Pins {
	snap := src.a.Snapshot()
	v := inspect.FromSnapshot(node, inspect.SourceAgent, snap.Snapshot, opts)
	for _, p := range snap.Paths {
		v.Paths = append(v.Paths, string(p))
	}
	if pub != nil {
		st := pub.Status()
		v.Published = &st
	}
	return v
}

// agentSource is the agent as a report.Source.
type agentSource struct {
	a       *agent.Agent
	changes <-chan struct{}
}

func (s agentSource) Snapshot() report.Snapshot { return s.a.Snapshot().Snapshot }
func (s agentSource) Changed() <-chan struct{}  { return s.changes }

// agentHooks feeds the agent's hooks into its metrics.
type agentHooks struct{ m *metrics.Agent }

var _ agent.Hooks = agentHooks{}

func (h agentHooks) PinWritten(p agent.Path, window time.Duration) { h.m.PinWritten(string(p), window) }
func (h agentHooks) Allocated(policy.Assignment)                   { h.m.Allocated() }
func (h agentHooks) Released(policy.Assignment)                    { h.m.Released() }
func (h agentHooks) DriftRepaired(cgroup.ContainerRef)             { h.m.DriftRepaired() }
func (h agentHooks) Failed(reason agent.ErrorReason)               { h.m.Failed(string(reason)) }
func (h agentHooks) Reconciled(r policy.Repair)                    { h.m.StartupRepaired(string(r.Reason)) }
func (h agentHooks) IOLimitWritten(w agent.IOWrite)                { h.m.IOLimitWritten(string(w)) }
func (h agentHooks) SlurmProcessesConfined(n int)                  { h.m.SlurmProcessesConfined(n) }
func (h agentHooks) CheckpointWritten(took time.Duration, err error) {
	h.m.CheckpointWritten(took, err)
}
