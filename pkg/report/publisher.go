package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// FieldManager owns every field the publisher applies.
const FieldManager = "finegrain-nodeagent"

// Defaults of PublisherConfig.
const (
	DefaultMinInterval = 100 * time.Millisecond
	DefaultResync      = 5 * time.Minute
	DefaultMaxBackoff  = 30 * time.Second
	initialBackoff     = 200 * time.Millisecond
)

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Observer learns how publishing goes, for metrics. Calls come from the publisher's goroutine.
type Observer interface {
	// Published: the object showing generation is on the API server, latency after the publisher
	// was told of the oldest change it includes.
	Published(generation uint64, latency time.Duration)
	// PublishFailed: building or applying the object failed; the publisher retries.
	PublishFailed()
}

// PublisherConfig is what a Publisher needs.
type PublisherConfig struct {
	Client   dynamic.Interface
	NodeName string
	Topology *topology.Topology
	Source   Source
	Options  Options
	Logger   *slog.Logger
	// Observer is told of every publish; nil for none.
	Observer Observer
	// MinInterval is the least time between two applies (bursts of changes coalesce into one);
	// Resync how often the object is applied without a change, repairing an edit or a deletion by
	// someone else; MaxBackoff the longest wait between retries of a failed apply. Zero values
	// take the defaults above.
	MinInterval, Resync, MaxBackoff time.Duration
}

// Status is what the publisher last did.
type Status struct {
	// Generation and At: the last generation the API server accepted, and when (zero before the
	// first success).
	Generation uint64    `json:"generation"`
	At         time.Time `json:"at,omitzero"`
	// Error is the last failure since then, empty when the last attempt succeeded.
	Error string `json:"error,omitempty"`
}

// Publisher keeps the node's NodeResourceTopology object current.
type Publisher struct {
	cfg PublisherConfig
	log *slog.Logger

	mu     sync.Mutex
	status Status
}

// NewPublisher checks cfg and fills in its defaults.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("NodeResourceTopology publisher: no API client")
	case cfg.NodeName == "":
		return nil, errors.New("NodeResourceTopology publisher: no node name")
	case cfg.Topology == nil:
		return nil, fmt.Errorf("NodeResourceTopology publisher for node %s: no topology", cfg.NodeName)
	case cfg.Source == nil:
		return nil, fmt.Errorf("NodeResourceTopology publisher for node %s: no state source", cfg.NodeName)
	case cfg.Logger == nil:
		return nil, fmt.Errorf("NodeResourceTopology publisher for node %s: no logger", cfg.NodeName)
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	return &Publisher{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeName, "nodeResourceTopology", cfg.NodeName)}, nil
}

// Status returns what the publisher last did. It is safe to call from any goroutine.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Run publishes until ctx ends: once at start, then after every change notification (no sooner
// than MinInterval after the previous apply) and every Resync. A failed apply is retried with
// exponential back-off from a fresh snapshot. Run only returns when ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	node, err := p.lookupNode(ctx)
	if err != nil {
		return err
	}
	var (
		pending  = true
		force    = true
		since    = time.Now()
		next     time.Time
		backoff  time.Duration
		last     *unstructured.Unstructured
		timer    = time.NewTimer(time.Hour)
		resync   = time.NewTicker(p.cfg.Resync)
		changed  = p.cfg.Source.Changed()
		noticed  = func() { pending, since = true, minTime(since, time.Now()) }
		observer = p.cfg.Observer
	)
	defer timer.Stop()
	defer resync.Stop()
	for {
		if pending {
			if wait := time.Until(next); wait > 0 {
				timer.Reset(wait)
			} else {
				applied, err := p.publish(ctx, node, last, force, since)
				switch {
				case err == nil:
					last, pending, force, since, backoff = applied, false, false, time.Time{}, 0
					next = time.Now().Add(p.cfg.MinInterval)
				case ctx.Err() != nil:
					return nil
				case errors.Is(err, ErrNoState):
					// The agent notifies once its state is rebuilt; nothing to retry until then.
					pending = false
					p.log.Info("NodeResourceTopology waits for the agent's state")
				default:
					if observer != nil {
						observer.PublishFailed()
					}
					backoff = nextBackoff(backoff, p.cfg.MaxBackoff)
					next = time.Now().Add(backoff)
					p.log.Warn("NodeResourceTopology not published; retrying", "retryIn", backoff, "err", err)
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			noticed()
		case <-resync.C:
			noticed()
			force = true
		case <-timer.C:
		}
	}
}

// publish builds the object from a fresh snapshot and applies it, unless it equals last and the
// apply is not forced. It returns what the API server now holds from this field manager.
func (p *Publisher) publish(ctx context.Context, node NodeRef, last *unstructured.Unstructured, force bool, since time.Time) (*unstructured.Unstructured, error) {
	snap := p.cfg.Source.Snapshot()
	obj, err := Build(node, p.cfg.Topology, snap, p.cfg.Options)
	if err != nil {
		p.fail(err)
		return nil, err
	}
	u, err := nrt.ToUnstructured(obj)
	if err != nil {
		p.fail(err)
		return nil, err
	}
	if !force && last != nil && reflect.DeepEqual(u.Object, last.Object) {
		return last, nil
	}
	_, err = p.cfg.Client.Resource(nrt.GroupVersionResource).Apply(ctx, node.Name, u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		err = explainAPIError(fmt.Errorf("apply NodeResourceTopology %s: %w", node.Name, err))
		p.fail(err)
		return nil, err
	}
	latency := time.Since(since)
	p.mu.Lock()
	p.status = Status{Generation: snap.Generation, At: time.Now()}
	p.mu.Unlock()
	if p.cfg.Observer != nil {
		p.cfg.Observer.Published(snap.Generation, latency)
	}
	p.log.Debug("NodeResourceTopology published", "generation", snap.Generation, "latency", latency, "forced", force)
	return u, nil
}

func (p *Publisher) fail(err error) {
	p.mu.Lock()
	p.status.Error = err.Error()
	p.mu.Unlock()
}

// lookupNode reads the Node's UID for the ownerReference, retrying with back-off until it
// succeeds or ctx ends.
func (p *Publisher) lookupNode(ctx context.Context) (NodeRef, error) {
	var backoff time.Duration
	for {
		n, err := p.cfg.Client.Resource(nodesResource).Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
		if err == nil {
			return NodeRef{Name: n.GetName(), UID: n.GetUID()}, nil
		}
		if ctx.Err() != nil {
			return NodeRef{}, ctx.Err()
		}
		err = explainAPIError(fmt.Errorf("read Node %s for the NodeResourceTopology's owner: %w", p.cfg.NodeName, err))
		p.fail(err)
		if p.cfg.Observer != nil {
			p.cfg.Observer.PublishFailed()
		}
		backoff = nextBackoff(backoff, p.cfg.MaxBackoff)
		p.log.Warn("Node not readable; retrying", "retryIn", backoff, "err", err)
		select {
		case <-ctx.Done():
			return NodeRef{}, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// explainAPIError adds what to do for the failures an operator can fix.
func explainAPIError(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w (is the NodeResourceTopology CRD installed? kubectl apply -f daemonset/crds/noderesourcetopology.yaml)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w (the agent's service account needs the finegrain-nodeagent-report ClusterRole: get nodes; get, create, patch noderesourcetopologies)", err)
	}
	return err
}

// nextBackoff doubles the previous wait from initialBackoff up to about limit, with ±20 % jitter so
// that many agents do not retry in step after an API server outage.
func nextBackoff(prev, limit time.Duration) time.Duration {
	d := min(max(2*prev, initialBackoff), limit)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
