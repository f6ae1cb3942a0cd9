package nri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// Defaults of Options.
const (
	DefaultSocketPath = "/var/run/nri/nri.sock"
	// DefaultPluginName is what containerd's required_plugins must list.
	DefaultPluginName  = "finegrain"
	DefaultPluginIndex = "10"
	DefaultPodWait     = time.Second
	DefaultMinBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
)

// Events observed by Observer.Hook.
const (
	EventCreateContainer = "CreateContainer"
	EventUpdateContainer = "UpdateContainer"
	EventSynchronize     = "Synchronize"
	EventValidate        = "ValidateContainerAdjustment"
	EventRemovePod       = "RemovePodSandbox"
)

// Agent is what the plugin needs of the node agent (agent.Agent).
type Agent interface {
	Decide(ctx context.Context, req agent.ContainerRequest) (agent.Decision, error)
	ReleasePod(podUID string) []policy.Assignment
	// Started is closed once the agent rebuilt its state: the plugin registers only then.
	Started() <-chan struct{}
}

var _ Agent = (*agent.Agent)(nil)

// Observer receives what the plugin does, for metrics. Its methods must return at once.
type Observer interface {
	// Connected is called with true once the runtime synchronised the plugin, false when the
	// connection is gone.
	Connected(up bool)
	// Hook observes the time the plugin took to answer one runtime request.
	Hook(event string, took time.Duration)
	// Refused counts a container the plugin refused (or rejected in validation), by reason.
	Refused(reason string)
}

// NopObserver observes nothing.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) Connected(bool)             {}
func (NopObserver) Hook(string, time.Duration) {}
func (NopObserver) Refused(string)             {}

// Options configures the plugin.
type Options struct {
	// SocketPath is the runtime's NRI socket.
	SocketPath string
	// PluginName and PluginIndex register the plugin; containerd's required_plugins lists the
	// name.
	PluginName, PluginIndex string
	// PodWait bounds how long CreateContainer waits for the agent to receive a pod that asks for
	// exclusive CPUs from the API server; it is capped at half the runtime's request timeout.
	PodWait time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts.
	MinBackoff, MaxBackoff time.Duration
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{SocketPath: DefaultSocketPath, PluginName: DefaultPluginName, PluginIndex: DefaultPluginIndex,
		PodWait: DefaultPodWait, MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.SocketPath == "":
		return errors.New("NRI socket path is empty")
	case o.PluginName == "" || o.PluginIndex == "":
		return errors.New("NRI plugin name and index must be set (containerd's required_plugins names the plugin)")
	case len(o.PluginIndex) != 2 || o.PluginIndex[0] < '0' || o.PluginIndex[0] > '9' || o.PluginIndex[1] < '0' || o.PluginIndex[1] > '9':
		return fmt.Errorf("NRI plugin index %q: want two digits, such as 10", o.PluginIndex)
	case o.PodWait < 0:
		return fmt.Errorf("NRI pod wait %s must not be negative", o.PodWait)
	case o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff:
		return fmt.Errorf("NRI reconnection back-off %s..%s: want 0 < min <= max", o.MinBackoff, o.MaxBackoff)
	}
	return nil
}

// Plugin is the node agent's NRI plugin. Run connects it and keeps it connected.
type Plugin struct {
	opts  Options
	agent Agent
	obs   Observer
	log   *slog.Logger
	// now is the clock of the hook timings.
	now func() time.Time

	mu sync.Mutex
	// stub is the current connection's.
	stub stub.Stub
	// runtime issues the container IDs (from Configure).
	runtime cgroup.Runtime
	// podWait is Options.PodWait capped by the runtime's request timeout.
	podWait time.Duration
	// ctrs are the runtime's containers that have not stopped, by ID.
	ctrs map[string]*tracked
	// pending are the decisions of created containers awaiting validation, by container ID.
	pending map[string]pending
	// connectedAt is when the runtime last synchronised the plugin; zero while disconnected.
	connectedAt time.Time
}

// tracked is a container the plugin knows of.
type tracked struct {
	podUID, name string
	// managed is true when the agent decided the container; only those are updated.
	managed, exclusive bool
	// cpus and mems are what the runtime last applied, as the plugin knows it.
	cpus, mems string
}

// pending is what validation must find in a container's final adjustment.
type pending struct {
	// passThrough is true when the plugin left the container as the runtime made it (the agent
	// does not act).
	passThrough bool
	cpus, mems  string
}

// New returns a plugin for the agent a. obs may be nil.
func New(opts Options, a Agent, obs Observer, log *slog.Logger) (*Plugin, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if a == nil || log == nil {
		return nil, errors.New("NRI plugin: the agent and a logger are required")
	}
	if obs == nil {
		obs = NopObserver{}
	}
	return &Plugin{opts: opts, agent: a, obs: obs, log: log, now: time.Now, runtime: cgroup.RuntimeContainerd,
		podWait: opts.PodWait, ctrs: map[string]*tracked{}, pending: map[string]pending{}}, nil
}

// Run waits for the agent to start, then connects to the runtime and reconnects whenever the
// connection is lost (the runtime restarted, the socket is not there yet), waiting MinBackoff
// doubling up to MaxBackoff between attempts, until ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	select {
	case <-p.agent.Started():
	case <-ctx.Done():
		return nil
	}
	backoff := p.opts.MinBackoff
	failing := false
	for {
		s, err := stub.New(p, stub.WithPluginName(p.opts.PluginName), stub.WithPluginIdx(p.opts.PluginIndex),
			stub.WithSocketPath(p.opts.SocketPath), stub.WithLogger(stubLogger{p.log}),
			// Runtimes whose NRI knows failure policies fail a request the plugin cannot
			// answer; older ones ignore this and rely on the plugin being a validator.
			stub.WithFailurePolicy(&api.FailurePolicy{FailRequest: true}))
		if err != nil {
			return fmt.Errorf("NRI plugin: %w", err)
		}
		p.mu.Lock()
		p.stub = s
		p.mu.Unlock()
		err = s.Run(ctx)
		up := p.disconnected()
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case up >= time.Minute:
			backoff = p.opts.MinBackoff
			failing = false
			p.log.Warn("NRI connection lost; reconnecting", "socket", p.opts.SocketPath, "connectedFor", up, "reason", errString(err))
		case !failing:
			failing = true
			p.log.Warn("cannot stay connected to the runtime's NRI socket; retrying with back-off", "socket", p.opts.SocketPath, "reason", errString(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.opts.MaxBackoff)
	}
}

// disconnected marks the connection gone and returns how long it had been synchronised.
func (p *Plugin) disconnected() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var up time.Duration
	if !p.connectedAt.IsZero() {
		up = p.now().Sub(p.connectedAt)
		p.obs.Connected(false)
	}
	p.connectedAt = time.Time{}
	return up
}

// Connected reports whether the runtime has synchronised the plugin on its current connection.
func (p *Plugin) Connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.connectedAt.IsZero()
}

func errString(err error) string {
	if err == nil {
		return "connection closed"
	}
	return err.Error()
}
