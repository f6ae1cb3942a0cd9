package v1alpha1

import (
	"fmt"
	"net/url"
	"path"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxQueryLength bounds metric.source.query.query and .url.
const MaxQueryLength = 4096

// maxConditionMessage is the API server's bound on a condition's message.
const maxConditionMessage = 32768

// prometheusMetricName is the Prometheus data model's metric name syntax.
var prometheusMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// ValidateServiceObjective reports everything wrong with a defaulted objective, each error naming
// its field and what is allowed. An empty list means the loop can act on it.
func ValidateServiceObjective(obj *ServiceObjective) field.ErrorList {
	var errs field.ErrorList
	np := field.NewPath("metadata", "name")
	if obj.Name == "" {
		errs = append(errs, field.Required(np, "the objective needs a name"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(obj.Name) {
			errs = append(errs, field.Invalid(np, obj.Name, msg))
		}
	}
	spec := &obj.Spec
	sp := field.NewPath("spec")
	errs = append(errs, validateTargetRef(&spec.TargetRef, sp.Child("targetRef"))...)
	errs = append(errs, validateMetric(&spec.Metric, sp.Child("metric"))...)
	errs = append(errs, validatePodBounds(&spec.PodBounds, sp.Child("podBounds"))...)
	rp := sp.Child("replicas")
	switch r := spec.Replicas; {
	case r.Min < 1:
		errs = append(errs, field.Invalid(rp.Child("min"), r.Min, "must be at least 1 pod"))
	case r.Max < r.Min || r.Max > MaxObjectiveReplicas:
		errs = append(errs, field.Invalid(rp.Child("max"), r.Max,
			fmt.Sprintf("must be between replicas.min (%d) and %d pods", r.Min, MaxObjectiveReplicas)))
	}
	if p := spec.PeriodSeconds; p < 1 || p > MaxObjectivePeriodSeconds {
		errs = append(errs, field.Invalid(sp.Child("periodSeconds"), p,
			fmt.Sprintf("must be between 1 and %d seconds", MaxObjectivePeriodSeconds)))
	}
	if m := spec.ShrinkMarginPercent; m < 1 || m > 99 {
		errs = append(errs, field.Invalid(sp.Child("shrinkMarginPercent"), m, "must be between 1 and 99 percent"))
	}
	if s := spec.ScaleDownStabilizationSeconds; s < 1 || s > MaxScaleDownStabilizationSeconds {
		errs = append(errs, field.Invalid(sp.Child("scaleDownStabilizationSeconds"), s,
			fmt.Sprintf("must be between 1 and %d seconds (omit it for %d periods)", MaxScaleDownStabilizationSeconds, DefaultRecallPeriods)))
	}
	return errs
}

func validateTargetRef(ref *ObjectiveTargetRef, rp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch ref.Kind {
	case TargetDeployment, TargetStatefulSet:
	default:
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, []TargetKind{TargetDeployment, TargetStatefulSet}))
	}
	if ref.Name == "" {
		return append(errs, field.Required(rp.Child("name"), "name the Deployment or StatefulSet to hold to the objective"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
		errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
	}
	return errs
}

func validateMetric(m *ObjectiveMetric, mp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Target.Sign() <= 0 {
		errs = append(errs, field.Invalid(mp.Child("target"), m.Target.String(),
			"must be positive, in the metric's unit: \"20m\" for 20 ms, \"2k\" for 2,000 per second"))
	}
	switch m.Direction {
	case AtMost, AtLeast:
	default:
		errs = append(errs, field.NotSupported(mp.Child("direction"), m.Direction, []Direction{AtMost, AtLeast}))
	}
	sp := mp.Child("source")
	src := &m.Source
	if (src.Pods == nil) == (src.Query == nil) {
		return append(errs, field.Invalid(sp, "", "set exactly one of pods (the pods' own Prometheus endpoint) and query (a Prometheus-compatible query API)"))
	}
	if p := src.Pods; p != nil {
		pp := sp.Child("pods")
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, "must be a TCP port between 1 and 65535"))
		}
		if !path.IsAbs(p.Path) || path.Clean(p.Path) != p.Path || len(p.Path) > MaxQueryLength {
			errs = append(errs, field.Invalid(pp.Child("path"), p.Path, "must be a clean absolute URL path such as /metrics"))
		}
		if !prometheusMetricName.MatchString(p.Metric) {
			errs = append(errs, field.Invalid(pp.Child("metric"), p.Metric,
				"must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), such as http_request_duration_p99_seconds"))
		}
	}
	if q := src.Query; q != nil {
		qp := sp.Child("query")
		if msg := checkQueryURL(q.URL); msg != "" {
			errs = append(errs, field.Invalid(qp.Child("url"), q.URL, msg))
		}
		switch {
		case q.Query == "":
			errs = append(errs, field.Required(qp.Child("query"), "give the PromQL expression whose one sample is the metric"))
		case len(q.Query) > MaxQueryLength:
			errs = append(errs, field.TooLong(qp.Child("query"), "", MaxQueryLength))
		}
	}
	return errs
}

// checkQueryURL says what is wrong with the base URL of a query API, or "".
func checkQueryURL(raw string) string {
	const want = "must be the http or https base URL of a Prometheus-compatible API, such as http://prometheus.monitoring:9090"
	if len(raw) > MaxQueryLength {
		return want
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return want + ": " + err.Error()
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Opaque != "":
		return want
	case u.User != nil:
		return "must not carry credentials"
	case u.RawQuery != "" || u.Fragment != "":
		return "must not have a query or fragment; the loop appends /api/v1/query?query=..."
	}
	return ""
}

func validatePodBounds(b *PodBounds, bp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range []struct {
		name   string
		lo, hi resource.Quantity
		unit   string
	}{
		{"cpu", b.Min.CPU, b.Max.CPU, "cores, such as \"4\" or \"1500m\""},
		{"memory", b.Min.Memory, b.Max.Memory, "bytes, such as 8Gi"},
		{"ioBandwidth", b.Min.IOBandwidth, b.Max.IOBandwidth, "bytes per second, such as 100M"},
	} {
		switch {
		case r.hi.Sign() <= 0:
			errs = append(errs, field.Required(bp.Child("max", r.name), "give the most one pod may get, in "+r.unit))
		case r.lo.Sign() <= 0:
			errs = append(errs, field.Invalid(bp.Child("min", r.name), r.lo.String(), "must be positive"))
		case r.lo.Cmp(r.hi) > 0:
			errs = append(errs, field.Invalid(bp.Child("min", r.name), r.lo.String(),
				fmt.Sprintf("must be at most podBounds.max.%s (%s)", r.name, r.hi.String())))
		}
	}
	if c := b.Max.CPU; c.Sign() > 0 && c.MilliValue() > MaxCPUPerTask*1000 {
		errs = append(errs, field.Invalid(bp.Child("max", "cpu"), c.String(), fmt.Sprintf("must be at most %d cores", MaxCPUPerTask)))
	}
	if m := b.Max.Memory; m.Cmp(*resource.NewQuantity(MaxPodMemoryBytes, resource.BinarySI)) > 0 {
		errs = append(errs, field.Invalid(bp.Child("max", "memory"), m.String(), "must be at most 1Pi"))
	}
	if io := b.Max.IOBandwidth; io.Cmp(*resource.NewQuantity(MaxPodIOBandwidth, resource.DecimalSI)) > 0 {
		errs = append(errs, field.Invalid(bp.Child("max", "ioBandwidth"), io.String(), "must be at most 1P (bytes per second)"))
	}
	if c := b.Min.CPU; c.Sign() > 0 && c.Cmp(resource.MustParse("1m")) < 0 {
		errs = append(errs, field.Invalid(bp.Child("min", "cpu"), c.String(), "must be at least 1m (a thousandth of a core)"))
	}
	return errs
}

// ServiceObjectiveValidity is the Valid condition for an objective: False with reason
// InvalidSpec and every problem listed when errs is not empty, True otherwise.
func ServiceObjectiveValidity(obj *ServiceObjective, errs field.ErrorList) metav1.Condition {
	c := metav1.Condition{Type: ObjectiveValid, ObservedGeneration: obj.Generation}
	if len(errs) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "Valid", "the objective is valid; the loop measures and resizes "+string(obj.Spec.TargetRef.Kind)+" "+obj.Spec.TargetRef.Name
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, "InvalidSpec"
	c.Message = fmt.Sprintf("the loop leaves %s %s alone until the objective is fixed: %v",
		obj.Spec.TargetRef.Kind, obj.Spec.TargetRef.Name, errs.ToAggregate())
	if len(c.Message) > maxConditionMessage {
		c.Message = c.Message[:maxConditionMessage-3] + "..."
	}
	return c
}
