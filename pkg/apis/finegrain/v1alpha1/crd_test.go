package v1alpha1

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A CRD's structural schema prunes every field it does not declare: a field of the Go types
// missing from daemonset/placer/crd-*.yaml would be dropped by the API server without a word.
// Every JSON field of the spec and status types (the pod templates aside, which the schema keeps
// as written) must be declared there.
func TestCRDDeclaresEveryField(t *testing.T) {
	root := crdSchema(t, "crd-hpcjob.yaml")
	check(t, "spec", reflect.TypeFor[HPCJobSpec](), root.Properties["spec"])
	check(t, "status", reflect.TypeFor[HPCJobStatus](), root.Properties["status"])
}

func TestServiceObjectiveCRDDeclaresEveryField(t *testing.T) {
	root := crdSchema(t, "crd-serviceobjective.yaml")
	check(t, "spec", reflect.TypeFor[ServiceObjectiveSpec](), root.Properties["spec"])
	check(t, "status", reflect.TypeFor[ServiceObjectiveStatus](), root.Properties["status"])
}

func TestVirtualClusterCRDDeclaresEveryField(t *testing.T) {
	root := crdSchema(t, "crd-virtualcluster.yaml")
	check(t, "spec", reflect.TypeFor[VirtualClusterSpec](), root.Properties["spec"])
	check(t, "status", reflect.TypeFor[VirtualClusterStatus](), root.Properties["status"])
}

// crdSchema reads the one version's schema of daemonset/placer/<file>.
func crdSchema(t *testing.T, file string) schemaNode {
	t.Helper()
	data, err := os.ReadFile("../../../../daemonset/placer/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema schemaNode `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != Version {
		t.Fatalf("%s: CRD versions %+v, want one: %s", file, crd.Spec.Versions, Version)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

type schemaNode struct {
	Properties map[string]schemaNode
	Items      *schemaNode
}

// check walks the struct type t and the schema node s together.
func check(t *testing.T, path string, typ reflect.Type, s schemaNode) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if s.Items != nil {
			s = *s.Items
		}
	}
	if typ.Kind() != reflect.Struct || !strings.HasPrefix(typ.PkgPath(), "github.com/finegrain-dev/") {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		sub, ok := s.Properties[name]
		if !ok {
			t.Errorf("%s.%s is a field of %s but not declared in the CRD's schema: the API server would prune it", path, name, typ.Name())
			continue
		}
		check(t, path+"."+name, f.Type, sub)
	}
}
