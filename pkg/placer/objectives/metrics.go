package objectives

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the loop's Prometheus series, one set per objective (labels namespace and
// objective), on the placer's /metrics.
type Metrics struct {
	// ViolationSeconds counts the seconds the objective's measured value was on the wrong side of
	// its target: each measurement that violates it adds the time since the one before (at
	// most two periods).
	ViolationSeconds *prometheus.CounterVec
	// Measured, Smoothed and Target are the last measurement, the smoothed value the decision
	// used, and the target, in the metric's unit.
	Measured, Smoothed, Target *prometheus.GaugeVec
	// PodCPU and Replicas are the size last decided (cores per pod, pods).
	PodCPU, Replicas *prometheus.GaugeVec
	// Resizes counts size changes applied: pods resized in place (kind pod) and replica count
	// changes (kind replicas).
	Resizes *prometheus.CounterVec
}

var objectiveLabels = []string{"namespace", "objective"}

// NewMetrics registers the loop's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, objectiveLabels)
	}
	m := &Metrics{
		ViolationSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "finegrain_objective_violation_seconds_total",
			Help: "Seconds a service objective's measured value was on the wrong side of its target.",
		}, objectiveLabels),
		Measured: gauge("finegrain_objective_measured_value", "Last measurement of a service objective's metric, in its unit."),
		Smoothed: gauge("finegrain_objective_smoothed_value", "Smoothed value of a service objective's metric the last decision used."),
		Target:   gauge("finegrain_objective_target_value", "Target of a service objective's metric, in its unit."),
		PodCPU:   gauge("finegrain_objective_pod_cpu_cores", "CPU per pod a service objective's loop last decided, in cores."),
		Replicas: gauge("finegrain_objective_replicas", "Replicas a service objective's loop last decided."),
		Resizes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "finegrain_objective_resizes_total",
			Help: "Size changes a service objective's loop applied: pods resized in place (kind pod), replica count changes (kind replicas).",
		}, append(objectiveLabels[:2:2], "kind")),
	}
	reg.MustRegister(m.ViolationSeconds, m.Measured, m.Smoothed, m.Target, m.PodCPU, m.Replicas, m.Resizes)
	return m
}

// forget drops the series of a deleted objective ("namespace/name").
func (m *Metrics) forget(key string) {
	ns, name, _ := strings.Cut(key, "/")
	labels := prometheus.Labels{"namespace": ns, "objective": name}
	for _, v := range []*prometheus.MetricVec{
		m.ViolationSeconds.MetricVec, m.Measured.MetricVec, m.Smoothed.MetricVec, m.Target.MetricVec,
		m.PodCPU.MetricVec, m.Replicas.MetricVec, m.Resizes.MetricVec,
	} {
		v.DeletePartialMatch(labels)
	}
}
