package v1alpha1

// SetDefaults fills omitted fields of spec with their documented defaults; it is idempotent and
// never overwrites a value the user gave (invalid values are left for Validate to report).
func SetDefaults(spec *HPCJobSpec) {
	if spec.Profile == "" {
		spec.Profile = ProfileCPU
	}
	if spec.Granularity == "" {
		spec.Granularity = GranularityScale
	}
	if spec.Placement == "" {
		spec.Placement = LeastLoaded
	}
	if spec.Gang.TimeoutSeconds == 0 {
		spec.Gang.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if spec.Elastic != nil && spec.Elastic.RescaleGapSeconds == 0 {
		spec.Elastic.RescaleGapSeconds = DefaultRescaleGapSeconds
	}
}
