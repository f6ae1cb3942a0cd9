package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cgroup/cgrouptest"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// memStore is an in-memory checkpoint store.
type memStore struct {
	mu   sync.Mutex
	data []byte
}

func (s *memStore) Read() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil, fmt.Errorf("read checkpoint: %w", fs.ErrNotExist)
	}
	return s.data, nil
}

func (s *memStore) Write(d []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = append([]byte(nil), d...)
	return nil
}

const testNodeName = "node-a"

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestReportingAroundARealAgent runs the agent core (its allocator and state; the API server and
// the cgroups are fakes) with the reporting side wired as `nodeagent run` wires it: a pinned pod
// must show up, with the same CPUs, in the applied NodeResourceTopology, in /pins and in /metrics.
func TestReportingAroundARealAgent(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Two NUMA nodes of four single-thread cores: 0-3 and 4-7.
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 1, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "hpc", UID: "00000000-0000-4000-8000-000000000001",
			Labels: map[string]string{classify.LabelPinning: classify.PinningExclusive}},
		Spec: corev1.PodSpec{NodeName: testNodeName, Containers: []corev1.Container{{Name: "rank", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		}}}},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed, Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "rank", ContainerID: "containerd://" + strings.Repeat("b", 64), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
	cg := cgrouptest.NewRecorder(cgroup.V1)
	ref, err := cgroup.NewContainerRef(string(worker.UID), string(worker.Status.QOSClass), worker.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	cg.Add(ref, cgroup.Resources{CPUs: topo.OnlineCPUs, Mems: cpuset.New(0, 1)})

	rep, err := newReporting(reportingOptions{inspectAddress: freeAddress(t), metricsAddress: freeAddress(t), publishNRT: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	opts := agent.DefaultOptions()
	opts.NodeName = testNodeName
	opts.StartupAPITimeout = 2 * time.Second
	opts.ReconcileInterval = 20 * time.Millisecond
	opts.Hooks = rep.hooks()
	a, err := agent.NewFromDeps(opts, agent.Deps{
		Pods: fake.NewClientset(worker).CoreV1().Pods(""), Topology: topo, Writer: cg, Store: &memStore{}, Recorder: record.NewFakeRecorder(100),
		KubeletPolicy: func() (kubeletpolicy.Result, error) { return kubeletpolicy.Result{Policy: "none"}, nil }, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	node := &unstructured.Unstructured{}
	node.SetAPIVersion("v1")
	node.SetKind("Node")
	node.SetName(testNodeName)
	node.SetUID("node-uid")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nrt.GroupVersionResource: "NodeResourceTopologyList", {Version: "v1", Resource: "nodes"}: "NodeList"}, node)
	dyn.PrependReactor("patch", nrt.Resource, applyReactor(dyn))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = a.Run(ctx) }()
	errc := make(chan error, 1)
	go func() {
		defer wg.Done()
		errc <- rep.run(ctx, a, testNodeName, dyn, topo, report.Options{WholeCores: true})
	}()
	defer func() {
		cancel()
		wg.Wait()
		if err := <-errc; err != nil {
			t.Errorf("reporting: %v", err)
		}
	}()

	var pinned cpuset.CPUSet
	waitFor(t, "the worker's cgroup to be pinned", func() bool {
		s, err := cg.Read(ref)
		pinned = s.CPUs
		return err == nil && s.CPUs.Size() == 2
	})
	want := "hpc/worker-0/rank=" + pinned.String()
	waitFor(t, "the NodeResourceTopology to list the pin "+want, func() bool {
		u, err := dyn.Resource(nrt.GroupVersionResource).Get(context.Background(), testNodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		o, err := nrt.FromUnstructured(u)
		if err != nil {
			return false
		}
		for _, z := range o.Zones {
			if v, _ := nrt.AttributeValue(z.Attributes, nrt.AttrPins); v == want {
				return true
			}
		}
		return false
	})

	base := "http://" + rep.opts.inspectAddress
	var view inspect.Pins
	waitFor(t, "/pins to show the pin as published", func() bool {
		view, err = inspect.Fetch(context.Background(), http.DefaultClient, base)
		return err == nil && len(view.Containers) == 1 && view.Published != nil && view.Published.Generation == view.Generation
	})
	if c := view.Containers[0]; c.CPUs != pinned.String() || c.Pod != "worker-0" || c.Pool != inspect.PoolExclusive {
		b, _ := json.Marshal(view)
		t.Errorf("/pins = %s, want hpc/worker-0 rank exclusive on %s", b, pinned)
	}
	for _, path := range []string{inspect.PathHealthz, inspect.PathReadyz} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, resp.StatusCode, body)
		}
	}
	// The same metrics on the inspection address and on --metrics-address, which serves nothing
	// else.
	metricsBase := "http://" + rep.opts.metricsAddress
	for _, b := range []string{base, metricsBase} {
		if err := testutil.ScrapeAndCompare(b+inspect.PathMetrics, strings.NewReader(`
# HELP finegrain_nodeagent_pinned_containers Containers holding exclusive CPUs.
# TYPE finegrain_nodeagent_pinned_containers gauge
finegrain_nodeagent_pinned_containers 1
# HELP finegrain_nodeagent_allocations_total Exclusive CPU assignments made to containers.
# TYPE finegrain_nodeagent_allocations_total counter
finegrain_nodeagent_allocations_total 1
`), "finegrain_nodeagent_pinned_containers", "finegrain_nodeagent_allocations_total"); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	if resp, err := http.Get(metricsBase + inspect.PathPins); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET %s on --metrics-address = %d, want 404: pins stay on the inspection address", inspect.PathPins, resp.StatusCode)
	}
	numa := view.Containers[0].NUMANode
	if numa == nil {
		t.Fatal("pin without NUMA node")
	}
	free := topo.CPUsOfNUMANode(topology.NUMAID(*numa)).Difference(pinned).Size()
	if err := testutil.ScrapeAndCompare(base+inspect.PathMetrics, strings.NewReader(fmt.Sprintf(`
# HELP finegrain_nodeagent_exclusive_cpus CPUs of the NUMA node held exclusively by containers.
# TYPE finegrain_nodeagent_exclusive_cpus gauge
finegrain_nodeagent_exclusive_cpus{numa_node="%d"} 2
finegrain_nodeagent_exclusive_cpus{numa_node="%d"} 0
`, *numa, 1-*numa)), "finegrain_nodeagent_exclusive_cpus"); err != nil {
		t.Error(err)
	}
	if v := view.NUMANodes[*numa]; v.Free != free {
		t.Errorf("/pins NUMA node %d free = %d, want %d", *numa, v.Free, free)
	}
}

// applyReactor stores server-side applies in the fake's tracker, creating the object when absent
// as the API server does.
func applyReactor(dyn *dynamicfake.FakeDynamicClient) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch, ok := action.(clienttesting.PatchAction)
		if !ok || patch.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(patch.GetPatch(), &u.Object); err != nil {
			return true, nil, err
		}
		gvr := patch.GetResource()
		if _, err := dyn.Tracker().Get(gvr, "", u.GetName()); err != nil {
			return true, u, dyn.Tracker().Create(gvr, u, "")
		}
		return true, u, dyn.Tracker().Update(gvr, u, "")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
