package v1alpha1

// DecodeServiceObjective reads one ServiceObjective from YAML or JSON, strictly: unknown or
// duplicate fields, a wrong apiVersion or kind, and type mismatches are errors. The result is
// defaulted and validated; an invalid objective is returned together with an
// *InvalidError listing every problem. source names the input in error messages (a file
// name, or "namespace/name").
func DecodeServiceObjective(data []byte, source string) (*ServiceObjective, error) {
	var obj ServiceObjective
	if err := decodeStrict(data, source, ServiceObjectiveKind, &obj, &obj.TypeMeta); err != nil {
		return nil, err
	}
	if obj.Namespace == "" {
		obj.Namespace = "default"
	}
	SetServiceObjectiveDefaults(&obj.Spec)
	if errs := ValidateServiceObjective(&obj); len(errs) > 0 {
		return &obj, &InvalidError{Kind: ServiceObjectiveKind, Object: obj.Namespace + "/" + obj.Name, Source: source, Errors: errs}
	}
	return &obj, nil
}
