package placer

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCheckAPIs(t *testing.T) {
	hpc := &metav1.APIResourceList{GroupVersion: "finegrain.dev/v1alpha1", APIResources: []metav1.APIResource{{Name: "hpcjobs"}}}
	nrt := &metav1.APIResourceList{GroupVersion: "topology.node.k8s.io/v1alpha2", APIResources: []metav1.APIResource{{Name: "noderesourcetopologies"}}}
	tests := []struct {
		served []*metav1.APIResourceList
		want   string
	}{
		{[]*metav1.APIResourceList{hpc, nrt}, ""},
		{[]*metav1.APIResourceList{nrt}, "API finegrain.dev/v1alpha1 is not served"},
		{[]*metav1.APIResourceList{hpc}, "install the NodeResourceTopology CRD"},
		{[]*metav1.APIResourceList{hpc, {GroupVersion: "topology.node.k8s.io/v1alpha2"}}, "API topology.node.k8s.io/v1alpha2 has no resource noderesourcetopologies"},
	}
	for _, tc := range tests {
		kube := fake.NewClientset()
		kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = tc.served
		err := checkAPIs(kube)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("served %d lists: error %v, want %q", len(tc.served), err, tc.want)
		}
	}
}
