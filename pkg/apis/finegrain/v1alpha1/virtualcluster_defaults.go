package v1alpha1

// SetVirtualClusterDefaults fills omitted fields of spec with their documented defaults; it is
// idempotent and never overwrites a value the user gave.
func SetVirtualClusterDefaults(spec *VirtualClusterSpec) {
	if spec.Image == "" {
		spec.Image = DefaultSlurmImage
	}
	if len(spec.Partitions) == 0 {
		spec.Partitions = []SlurmPartition{{Name: DefaultPartitionName, Default: true}}
	}
	if spec.SharedVolume != nil && spec.SharedVolume.MountPath == "" {
		spec.SharedVolume.MountPath = DefaultSharedMountPath
	}
}
