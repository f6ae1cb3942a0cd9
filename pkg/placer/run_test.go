package placer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
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

// The placer's typed client sends and accepts protobuf for built-in objects (a binding here), and
// leaves the configuration it was given, which the dynamic client for the CRDs uses, on JSON.
func TestTypedClientSpeaksProtobuf(t *testing.T) {
	var contentType, accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		contentType, accept = r.Header.Get("Content-Type"), r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "hpc"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := kube.CoreV1().Pods("hpc").Bind(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind through a protobuf client answered in JSON: %v", err)
	}
	if contentType != runtime.ContentTypeProtobuf {
		t.Errorf("binding sent as %q, want %q", contentType, runtime.ContentTypeProtobuf)
	}
	if !strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		t.Errorf("binding accepts %q, want protobuf first", accept)
	}
	if cfg.ContentType != "" || cfg.AcceptContentTypes != "" {
		t.Errorf("the shared configuration was changed to %q / %q", cfg.ContentType, cfg.AcceptContentTypes)
	}
}
