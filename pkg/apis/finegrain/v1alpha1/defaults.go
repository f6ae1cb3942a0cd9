package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

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
	if spec.TaskResources.Memory.IsZero() {
		spec.TaskResources.Memory = *resource.NewQuantity(DefaultTaskMemoryBytes, resource.BinarySI)
	}
	if spec.MPIImplementation == "" {
		spec.MPIImplementation = OpenMPI
	}
	if spec.SSHAuthMountPath == "" {
		spec.SSHAuthMountPath = DefaultSSHAuthMountPath
	}
	if spec.LauncherCreationPolicy == "" {
		spec.LauncherCreationPolicy = WaitForWorkersReady
	}
	if spec.RunPolicy.CleanPodPolicy == "" {
		spec.RunPolicy.CleanPodPolicy = CleanPodPolicyRunning
	}
	if spec.Elastic != nil && spec.Elastic.RescaleGapSeconds == 0 {
		spec.Elastic.RescaleGapSeconds = DefaultRescaleGapSeconds
	}
	if spec.Elastic != nil && spec.Elastic.RescaleHook != nil {
		h := spec.Elastic.RescaleHook
		if h.TimeoutSeconds == 0 {
			h.TimeoutSeconds = DefaultRescaleTimeoutSeconds
		}
		if h.HTTP != nil && h.HTTP.Path == "" {
			h.HTTP.Path = DefaultRescalePath
		}
	}
}
