package v1alpha1

// DecodeVirtualCluster reads one VirtualCluster from YAML or JSON, strictly: unknown or duplicate
// fields, a wrong apiVersion or kind, and type mismatches are errors. The result is defaulted and
// validated; an invalid one is returned together with an *InvalidError listing every problem.
// source names the input in error messages (a file name, or "namespace/name").
func DecodeVirtualCluster(data []byte, source string) (*VirtualCluster, error) {
	var obj VirtualCluster
	if err := decodeStrict(data, source, VirtualClusterKind, &obj, &obj.TypeMeta); err != nil {
		return nil, err
	}
	if obj.Namespace == "" {
		obj.Namespace = "default"
	}
	SetVirtualClusterDefaults(&obj.Spec)
	if errs := ValidateVirtualCluster(&obj); len(errs) > 0 {
		return &obj, &InvalidError{Kind: VirtualClusterKind, Object: obj.Namespace + "/" + obj.Name, Source: source, Errors: errs}
	}
	return &obj, nil
}
