package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API coordinates of the ServiceObjective resource.
const (
	ServiceObjectiveKind     = "ServiceObjective"
	ServiceObjectiveResource = "serviceobjectives"
)

// ServiceObjectiveGroupVersionResource addresses ServiceObjectives through the dynamic client.
var ServiceObjectiveGroupVersionResource = GroupVersion.WithResource(ServiceObjectiveResource)

// ServiceObjective holds a data-centre service (a Deployment or StatefulSet) to a performance
// target, as Genisys's feedback loop does: every period the objective's metric is measured and
// compared with the target, and the service is resized (CPU, memory and I/O bandwidth per pod,
// then the number of pods) within the bounds given here (docs/objectives.md).
type ServiceObjective struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceObjectiveSpec   `json:"spec"`
	Status ServiceObjectiveStatus `json:"status,omitempty"`
}

// ServiceObjectiveSpec is what the user declares.
type ServiceObjectiveSpec struct {
	// TargetRef names the workload held to the objective, in the objective's namespace.
	TargetRef ObjectiveTargetRef `json:"targetRef"`
	// Metric is the one performance metric, its target and where it is read.
	Metric ObjectiveMetric `json:"metric"`
	// PodBounds bounds the size of each pod.
	PodBounds PodBounds `json:"podBounds"`
	// Replicas bounds the number of pods.
	Replicas ReplicaBounds `json:"replicas"`
	// PeriodSeconds is the time between two measurements and decisions (default 10).
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// ShrinkMarginPercent: the service shrinks only while its metric beats the target by more
	// than this many percent (default 20); between the target and the margin it keeps its size.
	ShrinkMarginPercent int32 `json:"shrinkMarginPercent,omitempty"`
	// ScaleDownStabilizationSeconds is how long a violation is recalled: for this many seconds
	// after it the service does not shrink below the capacity the violation asked for (default
	// DefaultRecallPeriods periods, 300 s at the default period — the HorizontalPodAutoscaler's
	// default scale-down stabilisation). It is counted in whole periods, rounded up.
	ScaleDownStabilizationSeconds int32 `json:"scaleDownStabilizationSeconds,omitempty"`
}

// TargetKind is the kind of workload an objective resizes.
type TargetKind string

// Target kinds (both of apps/v1).
const (
	TargetDeployment  TargetKind = "Deployment"
	TargetStatefulSet TargetKind = "StatefulSet"
)

// ObjectiveTargetRef names a Deployment or StatefulSet of apps/v1.
type ObjectiveTargetRef struct {
	Kind TargetKind `json:"kind"`
	Name string     `json:"name"`
}

// Direction says which side of the target is good.
type Direction string

// Directions.
const (
	// AtMost: the metric must stay at or below the target (a latency: p99 ≤ 20 ms).
	AtMost Direction = "AtMost"
	// AtLeast: the metric must stay at or above the target (a throughput: ≥ 2,000 req/s).
	AtLeast Direction = "AtLeast"
)

// ObjectiveMetric is the performance metric and its target.
type ObjectiveMetric struct {
	// Target is the value the metric must not cross, in the metric's own unit (seconds for a
	// latency, per second for a rate): "20m" is 0.020, "2k" is 2,000.
	Target resource.Quantity `json:"target"`
	// Direction is AtMost or AtLeast.
	Direction Direction `json:"direction"`
	// Source is where the metric is read: exactly one of Pods and Query.
	Source MetricSource `json:"source"`
}

// MetricSource is exactly one of Pods and Query.
type MetricSource struct {
	// Pods reads the metric from every Ready pod of the target's own Prometheus endpoint.
	Pods *PodsMetricSource `json:"pods,omitempty"`
	// Query reads the metric from a Prometheus-compatible query API.
	Query *QueryMetricSource `json:"query,omitempty"`
}

// PodsMetricSource: the loop fetches http://<pod IP>:<port><path> (Prometheus text exposition)
// from every Ready pod of the target and reads the sample named Metric, a gauge. With direction
// AtMost the worst pod (the largest value) counts; with AtLeast the sum over the pods.
type PodsMetricSource struct {
	Port int32 `json:"port"`
	// Path defaults to /metrics.
	Path string `json:"path,omitempty"`
	// Metric is the Prometheus metric name.
	Metric string `json:"metric"`
}

// QueryMetricSource: the loop sends Query to the instant-query endpoint (<url>/api/v1/query) of a
// Prometheus-compatible API; the result must be one sample.
type QueryMetricSource struct {
	// URL is the API's base, http or https, such as http://prometheus.monitoring:9090.
	URL string `json:"url"`
	// Query is the PromQL expression.
	Query string `json:"query"`
}

// PodSize is the size of one pod: what the loop grants each pod of the service.
type PodSize struct {
	// CPU in cores (the pods' CPU request and limit).
	CPU resource.Quantity `json:"cpu,omitempty"`
	// Memory in bytes (the pods' memory request and limit).
	Memory resource.Quantity `json:"memory,omitempty"`
	// IOBandwidth in bytes per second, read and write each, on every block device of the pod.
	IOBandwidth resource.Quantity `json:"ioBandwidth,omitempty"`
}

// PodBounds bounds the size of each pod. Max is required; an omitted field of Min defaults to the
// starting size of a new service (DefaultStartCPU, DefaultStartMemory, DefaultStartIOBandwidth)
// or to Max where Max is smaller.
type PodBounds struct {
	Min PodSize `json:"min,omitempty"`
	Max PodSize `json:"max"`
}

// ReplicaBounds bounds the number of pods: Min defaults to 1, Max is required.
type ReplicaBounds struct {
	Min int32 `json:"min,omitempty"`
	Max int32 `json:"max"`
}

// Defaults and limits of a ServiceObjective. The starting size is the thesis's: a new service
// without history gets one core, 1 GiB and 10 MB/s of I/O per pod.
const (
	DefaultObjectivePeriodSeconds = 10
	DefaultShrinkMarginPercent    = 20
	DefaultMetricsPath            = "/metrics"
	DefaultStartCPUMilli          = 1000
	DefaultStartMemoryBytes       = 1 << 30
	DefaultStartIOBandwidth       = 10_000_000
	// MaxObjectivePeriodSeconds bounds periodSeconds (one hour).
	MaxObjectivePeriodSeconds = 3600
	// DefaultRecallPeriods is scaleDownStabilizationSeconds' default in periods.
	DefaultRecallPeriods = 30
	// MaxScaleDownStabilizationSeconds bounds scaleDownStabilizationSeconds: the default at the
	// longest period (30 hours).
	MaxScaleDownStabilizationSeconds = DefaultRecallPeriods * MaxObjectivePeriodSeconds
	// MaxObjectiveReplicas bounds replicas.max.
	MaxObjectiveReplicas = 10_000
	// MaxPodMemoryBytes (1Pi) and MaxPodIOBandwidth (1P bytes/s) bound podBounds.max, so that
	// sizes stay far from int64's range.
	MaxPodMemoryBytes = 1 << 50
	MaxPodIOBandwidth = 1_000_000_000_000_000
)

// Condition types of a ServiceObjective.
const (
	// ObjectiveValid is False, with the reason InvalidSpec and every problem in its message,
	// while the spec is invalid; the loop then leaves the service alone.
	ObjectiveValid = "Valid"
	// ObjectiveMet is True while the smoothed metric is on the good side of the target.
	ObjectiveMet = "Met"
	// ObjectiveMeasured is False while the metric cannot be read (reason MeasurementFailed,
	// the error in the message); the size then holds.
	ObjectiveMeasured = "Measured"
	// ObjectiveSizeApplied is True when every pod of the target has the decided size and the
	// target the decided replicas; False with the reason why not.
	ObjectiveSizeApplied = "SizeApplied"
)

// ServiceObjectiveStatus is what the loop reports.
type ServiceObjectiveStatus struct {
	// ObservedGeneration is the spec generation the status speaks of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas and PodSize are the size the loop last decided.
	Replicas int32    `json:"replicas,omitempty"`
	PodSize  *PodSize `json:"podSize,omitempty"`
	// LastMeasurement is the last value read, and Smoothed the value the decision used.
	LastMeasurement *resource.Quantity `json:"lastMeasurement,omitempty"`
	Smoothed        *resource.Quantity `json:"smoothed,omitempty"`
	// LastMeasurementTime is when LastMeasurement was read.
	LastMeasurementTime *metav1.Time `json:"lastMeasurementTime,omitempty"`
	// LastDecision is the last decision (Grow, Shrink or Hold) and LastDecisionReason why.
	LastDecision       string `json:"lastDecision,omitempty"`
	LastDecisionReason string `json:"lastDecisionReason,omitempty"`
	// LastResizeTime is when the size last changed.
	LastResizeTime *metav1.Time `json:"lastResizeTime,omitempty"`
	// History is what the control law remembers between periods, kept here so that a placer
	// that restarts, or another replica that takes the lead, goes on where the last one stopped.
	History    *ObjectiveHistory  `json:"history,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ObjectiveHistory is the control law's memory (pkg/objective's History).
type ObjectiveHistory struct {
	// Samples are the measurements since the size last changed, oldest first.
	Samples []resource.Quantity `json:"samples,omitempty"`
	// NeededCPU is the largest capacity (replicas × CPU per pod) a violation still recalled
	// asked for; absent when none is.
	NeededCPU *resource.Quantity `json:"neededCPU,omitempty"`
	// PeriodsSinceViolation counts the periods since the last violation.
	PeriodsSinceViolation int32 `json:"periodsSinceViolation,omitempty"`
	// RecallPeriods is how many periods a violation is recalled (doubled after failed probes).
	RecallPeriods int32 `json:"recallPeriods,omitempty"`
	// Probe is true while a shrink made with no violation recalled is watched.
	Probe bool `json:"probe,omitempty"`
}
