package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	namespace = "finegrain"
	subsystem = "nodeagent"
)

// Label values of checkpoint writes and publishes.
const (
	resultSuccess = "success"
	resultFailure = "failure"
)

// windowBuckets resolve the unpinned window from 100 µs (pinned at creation or from an inotify
// event) to 10 s (a missed event caught by the periodic scan).
var windowBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// ioBuckets suit a local file write or an API request: 1 ms to 10 s.
var ioBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Agent holds the counters and histograms of one node agent. Its methods are safe for concurrent
// use and return at once.
type Agent struct {
	pins               *prometheus.CounterVec
	window             *prometheus.HistogramVec
	allocations        prometheus.Counter
	releases           prometheus.Counter
	repairs            prometheus.Counter
	startupRepairs     *prometheus.CounterVec
	errors             *prometheus.CounterVec
	checkpointWrites   *prometheus.CounterVec
	checkpointDuration prometheus.Histogram
	publishes          *prometheus.CounterVec
	publishLatency     prometheus.Histogram
	publishedGen       prometheus.Gauge
	ioWrites           *prometheus.CounterVec
	slurmConfined      prometheus.Counter
}

// Labels lists the label values to create at zero, so that rates and alerts work before the
// first event of each kind.
type Labels struct {
	// Paths are the ways the agent learns of a container cgroup (the path label).
	Paths []string
	// ErrorReasons are the reasons errors are counted by (the reason label).
	ErrorReasons []string
	// IOWrites are the kinds of I/O limit writes (the kind label).
	IOWrites []string
}

// NewAgent creates the agent's metrics — of its pinning work, then of its checkpoint and
// reports — sets every label value it knows to zero, so that a dashboard sees them before the
// first event, and registers the metrics with reg.
func NewAgent(reg prometheus.Registerer, labels Labels) (*Agent, error) {
	m := &Agent{}
	m.pinningMetrics()
	m.stateMetrics()
	for _, p := range labels.Paths {
		m.pins.WithLabelValues(p)
		m.window.WithLabelValues(p)
	}
	for _, r := range labels.ErrorReasons {
		m.errors.WithLabelValues(r)
	}
	for _, k := range labels.IOWrites {
		m.ioWrites.WithLabelValues(k)
	}
	for _, r := range []string{resultSuccess, resultFailure} {
		m.checkpointWrites.WithLabelValues(r)
		m.publishes.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.pins, m.window, m.allocations, m.releases, m.repairs, m.startupRepairs, m.errors,
		m.checkpointWrites, m.checkpointDuration, m.publishes, m.publishLatency, m.publishedGen, m.ioWrites, m.slurmConfined} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register node agent metrics: %w", err)
		}
	}
	return m, nil
}

// pinningMetrics makes the metrics of pins, allocations, repairs and failures.
func (m *Agent) pinningMetrics() {
	m.pins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "pins_total",
		Help: "Exclusive pins written to a container's cgroup for the first time, by how the agent learnt of the container.",
	}, []string{"path"})
	m.window = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "unpinned_window_seconds",
		Help:    "Time from noticing a pinned container's cgroup to the end of writing its exclusive cpuset, by path.",
		Buckets: windowBuckets,
	}, []string{"path"})
	m.allocations = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "allocations_total",
		Help: "Exclusive CPU assignments made to containers.",
	})
	m.releases = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "releases_total",
		Help: "Exclusive CPU assignments returned to the shared pool.",
	})
	m.repairs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "repairs_total",
		Help: "Container cgroups rewritten because they no longer held what the agent wrote.",
	})
	m.startupRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "startup_repairs_total",
		Help: "Conflicts the start-up rebuild resolved between checkpoint, cgroups and API server, by reason.",
	}, []string{"reason"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "errors_total",
		Help: "Failures by reason; the agent's log says what failed.",
	}, []string{"reason"})
	m.ioWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "io_limit_writes_total",
		Help: "Pods whose block I/O bandwidth limit was written, by kind: set (from a ServiceObjective), cleared (no objective holds the pod), repaired (drift).",
	}, []string{"kind"})
	m.slurmConfined = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "slurm_processes_confined_total",
		Help: "Processes of Slurm jobs moved from a virtual cluster's slurmd container into their job's placeholder container.",
	})
}

// stateMetrics makes the metrics of checkpoint writes and NodeResourceTopology publishing.
func (m *Agent) stateMetrics() {
	m.checkpointWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "checkpoint_writes_total",
		Help: "Checkpoint file writes, by result.",
	}, []string{"result"})
	m.checkpointDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "checkpoint_write_duration_seconds",
		Help:    "Time to write the checkpoint file durably (successful writes).",
		Buckets: ioBuckets,
	})
	m.publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "nrt_publishes_total",
		Help: "NodeResourceTopology applies, by result.",
	}, []string{"result"})
	m.publishLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "nrt_publish_latency_seconds",
		Help:    "Time from a state change to its NodeResourceTopology being accepted by the API server.",
		Buckets: ioBuckets,
	})
	m.publishedGen = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "nrt_published_generation",
		Help: "State generation of the last NodeResourceTopology the API server accepted.",
	})
}

// PinWritten counts a first exclusive pin of a container and observes its unpinned window.
func (m *Agent) PinWritten(path string, window time.Duration) {
	m.pins.WithLabelValues(path).Inc()
	m.window.WithLabelValues(path).Observe(window.Seconds())
}

// Allocated counts an exclusive assignment.
func (m *Agent) Allocated() { m.allocations.Inc() }

// Released counts an exclusive assignment returned to the shared pool.
func (m *Agent) Released() { m.releases.Inc() }

// DriftRepaired counts a rewritten container cgroup.
func (m *Agent) DriftRepaired() { m.repairs.Inc() }

// IOLimitWritten counts a pod's I/O limit write, by kind.
func (m *Agent) IOLimitWritten(kind string) { m.ioWrites.WithLabelValues(kind).Inc() }

// SlurmProcessesConfined counts processes of Slurm jobs moved into their placeholders.
func (m *Agent) SlurmProcessesConfined(n int) { m.slurmConfined.Add(float64(n)) }

// StartupRepaired counts a conflict the start-up rebuild resolved, by reason.
func (m *Agent) StartupRepaired(reason string) { m.startupRepairs.WithLabelValues(reason).Inc() }

// Failed counts a failure by reason.
func (m *Agent) Failed(reason string) { m.errors.WithLabelValues(reason).Inc() }

// CheckpointWritten counts a checkpoint write and observes its duration when it succeeded.
func (m *Agent) CheckpointWritten(took time.Duration, err error) {
	if err != nil {
		m.checkpointWrites.WithLabelValues(resultFailure).Inc()
		return
	}
	m.checkpointWrites.WithLabelValues(resultSuccess).Inc()
	m.checkpointDuration.Observe(took.Seconds())
}

// Published counts a NodeResourceTopology apply (report.Observer).
func (m *Agent) Published(generation uint64, latency time.Duration) {
	m.publishes.WithLabelValues(resultSuccess).Inc()
	m.publishLatency.Observe(latency.Seconds())
	m.publishedGen.Set(float64(generation))
}

// PublishFailed counts a failed NodeResourceTopology apply (report.Observer).
func (m *Agent) PublishFailed() { m.publishes.WithLabelValues(resultFailure).Inc() }
