package v1alpha1

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads one HPCJob from YAML or JSON, strictly: unknown or duplicate fields, a wrong
// apiVersion or kind, and type mismatches are errors. The result is defaulted and validated; an
// invalid job is returned together with an error listing every problem. source names the input
// in error messages (a file name, or "namespace/name").
func Decode(data []byte, source string) (*HPCJob, error) {
	var job HPCJob
	if err := decodeStrict(data, source, Kind, &job, &job.TypeMeta); err != nil {
		return nil, err
	}
	if job.Namespace == "" {
		job.Namespace = "default"
	}
	SetDefaults(&job.Spec)
	if errs := Validate(&job); len(errs) > 0 {
		return &job, &InvalidError{Kind: Kind, Object: job.Namespace + "/" + job.Name, Source: source, Errors: errs}
	}
	return &job, nil
}

// decodeStrict reads YAML or JSON into obj, whose TypeMeta is tm, strictly, and checks that its
// apiVersion is finegrain.dev/v1alpha1 and its kind is kind.
func decodeStrict(data []byte, source, kind string, obj any, tm *metav1.TypeMeta) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("read %s from %s: not valid YAML or JSON: %w", kind, source, err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, obj)
	if err != nil {
		return fmt.Errorf("read %s from %s: %w", kind, source, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("read %s from %s: %w", kind, source, errors.Join(strict...))
	}
	if tm.APIVersion != GroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("read %s from %s: apiVersion %q kind %q, want apiVersion %q kind %q",
			kind, source, tm.APIVersion, tm.Kind, GroupVersion.String(), kind)
	}
	return nil
}

// InvalidError lists what is wrong with the spec of an object of this API.
type InvalidError struct {
	// Kind is the object's kind (HPCJob, ServiceObjective), Object its "namespace/name".
	Kind, Object string
	// Source names where the object was read from, when not the API server.
	Source string
	Errors field.ErrorList
}

func (e *InvalidError) Error() string {
	from := ""
	if e.Source != "" {
		from = " (" + e.Source + ")"
	}
	return fmt.Sprintf("%s %s%s is invalid: %v", e.Kind, e.Object, from, e.Errors.ToAggregate())
}
