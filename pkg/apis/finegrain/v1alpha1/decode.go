package v1alpha1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads one HPCJob from YAML or JSON, strictly: unknown or duplicate fields, a wrong
// apiVersion or kind, and type mismatches are errors. The result is defaulted and validated; an
// invalid job is returned together with an error listing every problem. source names the input
// in error messages (a file name, or "namespace/name").
func Decode(data []byte, source string) (*HPCJob, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("read HPCJob from %s: not valid YAML or JSON: %w", source, err)
	}
	var job HPCJob
	strict, err := sigsjson.UnmarshalStrict(js, &job)
	if err != nil {
		return nil, fmt.Errorf("read HPCJob from %s: %w", source, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("read HPCJob from %s: %w", source, errors.Join(strict...))
	}
	if job.APIVersion != GroupVersion.String() || job.Kind != Kind {
		return nil, fmt.Errorf("read HPCJob from %s: apiVersion %q kind %q, want apiVersion %q kind %q",
			source, job.APIVersion, job.Kind, GroupVersion.String(), Kind)
	}
	if job.Namespace == "" {
		job.Namespace = "default"
	}
	SetDefaults(&job.Spec)
	if errs := Validate(&job); len(errs) > 0 {
		return &job, &InvalidError{Job: job.Namespace + "/" + job.Name, Source: source, Errors: errs}
	}
	return &job, nil
}

// InvalidError lists what is wrong with a job's spec.
type InvalidError struct {
	Job string
	// Source names where the job was read from, when not the API server.
	Source string
	Errors field.ErrorList
}

func (e *InvalidError) Error() string {
	from := ""
	if e.Source != "" {
		from = " (" + e.Source + ")"
	}
	return fmt.Sprintf("HPCJob %s%s is invalid: %v", e.Job, from, e.Errors.ToAggregate())
}
