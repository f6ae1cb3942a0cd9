package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// hookBuckets resolve an NRI hook from 1 µs (a decision from memory) to the runtime's 2 s request
// timeout.
var hookBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1, 0.5, 1, 2}

// NRI holds the metrics of the node agent's NRI plugin and of its choice of container-creation
// path. Its methods are safe for concurrent use and return at once.
type NRI struct {
	paths     *prometheus.GaugeVec
	connected prometheus.Gauge
	connects  prometheus.Counter
	hook      *prometheus.HistogramVec
	refusals  *prometheus.CounterVec
}

// NRILabels lists the label values to create at zero.
type NRILabels struct {
	// Paths are every way the agent can learn of new containers (the path label); Enabled those it
	// uses.
	Paths, Enabled []string
	// Events are the runtime requests the plugin answers (the event label).
	Events []string
	// Reasons are why the plugin refuses a container (the reason label).
	Reasons []string
}

// NewNRI creates the metrics and registers them with reg.
func NewNRI(reg prometheus.Registerer, labels NRILabels) (*NRI, error) {
	m := &NRI{
		paths: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "path_enabled",
			Help: "1 for each way the agent learns of new containers on this node (nri: pinned at creation through NRI; inotify; informer; scan), 0 for the others.",
		}, []string{"path"}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "nri_connected",
			Help: "1 while the runtime has synchronised the NRI plugin on its current connection.",
		}),
		connects: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "nri_connections_total",
			Help: "Connections of the NRI plugin the runtime synchronised (the first and every reconnection).",
		}),
		hook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "nri_hook_duration_seconds",
			Help:    "Time the NRI plugin took to answer a runtime request, by request; container creations on the node wait for it.",
			Buckets: hookBuckets,
		}, []string{"event"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "nri_refusals_total",
			Help: "Containers the NRI plugin refused to let the runtime create, by reason.",
		}, []string{"reason"}),
	}
	for _, p := range labels.Paths {
		m.paths.WithLabelValues(p)
	}
	for _, p := range labels.Enabled {
		m.paths.WithLabelValues(p).Set(1)
	}
	for _, e := range labels.Events {
		m.hook.WithLabelValues(e)
	}
	for _, r := range labels.Reasons {
		m.refusals.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.paths, m.connected, m.connects, m.hook, m.refusals} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register NRI metrics: %w", err)
		}
	}
	return m, nil
}

// Connected records the plugin's connection state; each new connection is counted.
func (m *NRI) Connected(up bool) {
	if up {
		m.connects.Inc()
		m.connected.Set(1)
		return
	}
	m.connected.Set(0)
}

// Hook observes the time the plugin took to answer a request.
func (m *NRI) Hook(event string, took time.Duration) {
	m.hook.WithLabelValues(event).Observe(took.Seconds())
}

// Refused counts a refused container by reason.
func (m *NRI) Refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }
