package daemonset

import (
	"testing"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha1"
	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// The NodeResourceTopology CRD finegrain ships serves every version the noderesourcetopology API
// defines (the module scheduler-plugins and node-feature-discovery build on), storing v1alpha2,
// the one the agent writes: `kubectl apply -k daemonset/` over their CRD takes no version away
// from their clients. Each version's schema requires what that version's Go type requires.
func TestNRTCRDServesEveryUpstreamVersion(t *testing.T) {
	crd := objects(t, "crds/noderesourcetopology.yaml")[0]
	if group, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); group != nrt.Group || group != v1alpha2.SchemeGroupVersion.Group {
		t.Fatalf("CRD group %q, want %s", group, nrt.Group)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	byName := map[string]map[string]any{}
	for _, v := range versions {
		m := v.(map[string]any)
		byName[m["name"].(string)] = m
	}
	required := map[string][]any{
		v1alpha1.SchemeGroupVersion.Version: {"topologyPolicies", "zones"},
		v1alpha2.SchemeGroupVersion.Version: {"zones"},
	}
	for version, want := range required {
		v, ok := byName[version]
		if !ok {
			t.Errorf("version %s of the upstream API is not in the CRD", version)
			continue
		}
		if v["served"] != true {
			t.Errorf("version %s is not served", version)
		}
		wantStorage := version == nrt.Version
		if v["storage"] != wantStorage {
			t.Errorf("version %s has storage %v, want %v", version, v["storage"], wantStorage)
		}
		got, _, _ := unstructured.NestedSlice(v, "schema", "openAPIV3Schema", "required")
		if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
			t.Errorf("version %s requires %v, want %v", version, got, want)
		}
		for _, field := range []string{"zones", "topologyPolicies"} {
			if _, ok, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", field); !ok {
				t.Errorf("version %s has no schema for %s", version, field)
			}
		}
	}
	if len(byName) != len(required) {
		t.Errorf("CRD versions %v, want exactly the upstream API's v1alpha1 and v1alpha2", versions)
	}
}
