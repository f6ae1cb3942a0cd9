package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// A controller that has not run (a replica waiting on the Lease) has not synced; one that runs
// has, once its informers listed.
func TestHasSynced(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource: "NodeResourceTopologyList", v1alpha1.GroupVersionResource: "HPCJobList",
		schedv1alpha1.GroupVersionResource: "PodGroupList",
	})
	idle, err := New(fake.NewClientset(), dyn, &recorder{}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if idle.HasSynced() {
		t.Error("a controller that never ran reports its caches synced")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- idle.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !idle.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("the running controller's caches did not sync in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}
