package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// SetServiceObjectiveDefaults fills omitted fields of spec with their documented defaults; it is
// idempotent and never overwrites a value the user gave (invalid values are left for
// ValidateServiceObjective to report).
func SetServiceObjectiveDefaults(spec *ServiceObjectiveSpec) {
	if spec.PeriodSeconds == 0 {
		spec.PeriodSeconds = DefaultObjectivePeriodSeconds
	}
	if spec.ScaleDownStabilizationSeconds == 0 && spec.PeriodSeconds > 0 && spec.PeriodSeconds <= MaxObjectivePeriodSeconds {
		spec.ScaleDownStabilizationSeconds = DefaultRecallPeriods * spec.PeriodSeconds
	}
	if spec.ShrinkMarginPercent == 0 {
		spec.ShrinkMarginPercent = DefaultShrinkMarginPercent
	}
	if spec.Replicas.Min == 0 {
		spec.Replicas.Min = 1
	}
	if p := spec.Metric.Source.Pods; p != nil && p.Path == "" {
		p.Path = DefaultMetricsPath
	}
	lo, hi := &spec.PodBounds.Min, &spec.PodBounds.Max
	defaultMin(&lo.CPU, hi.CPU, *resource.NewMilliQuantity(DefaultStartCPUMilli, resource.DecimalSI))
	defaultMin(&lo.Memory, hi.Memory, *resource.NewQuantity(DefaultStartMemoryBytes, resource.BinarySI))
	defaultMin(&lo.IOBandwidth, hi.IOBandwidth, *resource.NewQuantity(DefaultStartIOBandwidth, resource.DecimalSI))
}

// defaultMin sets an omitted minimum to start, or to max where max is smaller and positive.
func defaultMin(lo *resource.Quantity, hi, start resource.Quantity) {
	if !lo.IsZero() {
		return
	}
	if hi.Sign() > 0 && hi.Cmp(start) < 0 {
		*lo = hi.DeepCopy()
		return
	}
	*lo = start
}
