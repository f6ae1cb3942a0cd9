package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the placer's Prometheus series.
type Metrics struct {
	// QueueLength is the number of gangs waiting (expansions of elastic jobs included).
	QueueLength prometheus.Gauge
	// PlacementLatency is the time from a gang's submission to the end of its binding.
	PlacementLatency prometheus.Histogram
	// PlanDuration is the time one gang's plan takes (granularity selection to fit).
	PlanDuration prometheus.Histogram
	// BoundPods counts pods bound, by role (worker, launcher, pod).
	BoundPods *prometheus.CounterVec
	// GangFailures counts failed placement attempts by reason: the dominant fit reason (numa,
	// cpu, taint, ...), timeout, bind, invalid.
	GangFailures *prometheus.CounterVec
	// Assumed is the number of pods bound by the placer that the informers have not shown bound
	// yet.
	Assumed prometheus.Gauge
	// Rescales counts elastic rescales by direction (expand, shrink).
	Rescales *prometheus.CounterVec
}

// NewMetrics registers the placer's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		QueueLength: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "finegrain_placer_queue_length", Help: "Gangs waiting to be placed.",
		}),
		PlacementLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "finegrain_placer_placement_latency_seconds",
			Help:    "Time from a gang's submission until all its pods are bound.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		PlanDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "finegrain_placer_plan_duration_seconds",
			Help:    "Time to plan one gang on a snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		BoundPods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "finegrain_placer_bound_pods_total", Help: "Pods bound by the placer, by role.",
		}, []string{"role"}),
		GangFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "finegrain_placer_gang_failures_total", Help: "Failed gang placement attempts, by reason.",
		}, []string{"reason"}),
		Assumed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "finegrain_placer_assumed_pods", Help: "Pods bound by the placer not yet seen bound by its informers.",
		}),
		Rescales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "finegrain_placer_rescales_total", Help: "Elastic job rescales, by direction.",
		}, []string{"direction"}),
	}
	reg.MustRegister(m.QueueLength, m.PlacementLatency, m.PlanDuration, m.BoundPods, m.GangFailures, m.Assumed, m.Rescales)
	return m
}
