//go:build e2e

// The free-core map on the real API server: the NodeResourceTopology CRD, the publisher's
// server-side apply under the agent's ClusterRole, how fast a change reaches the object, garbage
// collection with the Node, and `kubectl finegrain` reading it back as a kubectl plugin.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/pkg/topology"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// agentUser is who the node agent's pods act as (daemonset/nodeagent/rbac-report.yaml binds it).
const agentUser = "system:serviceaccount:" + framework.SystemNamespace + ":finegrain-nodeagent"

// nodeNameExtra is the user extra in which the API server gives the node a service account token
// is bound to (daemonset/policy/nrt-own-node.yaml).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// installReporting applies the CRD and the ClusterRole and waits until the CRD serves objects.
func installReporting(t *testing.T, c *framework.Cluster) {
	t.Helper()
	for _, f := range []string{"daemonset/namespace.yaml", "daemonset/crds/noderesourcetopology.yaml", "daemonset/nodeagent/rbac-report.yaml"} {
		if out, err := c.Kubectl(context.Background(), "apply", "-f", c.RepoPath(f)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	framework.Eventually(t, "the NodeResourceTopology CRD to be established", 30*time.Second, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(nrt.GroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
}

// stateSource is a report.Source the test drives, notifying like the agent does.
type stateSource struct {
	mu      sync.Mutex
	snap    report.Snapshot
	changed chan struct{}
}

func (s *stateSource) Snapshot() report.Snapshot { s.mu.Lock(); defer s.mu.Unlock(); return s.snap }
func (s *stateSource) Changed() <-chan struct{}  { return s.changed }
func (s *stateSource) set(snap report.Snapshot) {
	s.mu.Lock()
	s.snap = snap
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// fakeNode registers a Node object no kubelet backs, so the test's NodeResourceTopology does not
// collide with the real node's agent; deleting it must garbage-collect the object.
func fakeNode(t *testing.T, c *framework.Cluster) *corev1.Node {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "fg-report-e2e-", Labels: map[string]string{"finegrain.dev/e2e": "report"}},
		// Nothing may be scheduled to it, not even by a test running beside this one.
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "finegrain.dev/e2e-no-kubelet", Effect: corev1.TaintEffectNoSchedule},
			{Key: "finegrain.dev/e2e-no-kubelet", Effect: corev1.TaintEffectNoExecute},
		}},
	}
	n, err := c.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		_ = c.Dynamic.Resource(nrt.GroupVersionResource).Delete(context.Background(), n.Name, metav1.DeleteOptions{})
	})
	return n
}

func generationOf(u *unstructured.Unstructured) uint64 {
	o, err := nrt.FromUnstructured(u)
	if err != nil {
		return 0
	}
	g, _ := nrt.AttributeValue(o.Attributes, nrt.AttrGeneration)
	n, _ := strconv.ParseUint(g, 10, 64)
	return n
}

func TestPublisherOnRealAPIServer(t *testing.T) {
	c := framework.Setup(t)
	installReporting(t, c)
	node := fakeNode(t, c)

	// A 2-socket, 8-core, 2-thread machine with core 0 reserved and two pins.
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 2, CoresPerL3: 4, ThreadsPerCore: 2, MemoryPerNUMA: 64 << 30})
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0, 16), MinSharedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{4, 6} {
		if _, err := alloc.Allocate(policy.Request{Key: policy.Key{PodUID: fmt.Sprintf("uid-%d", i), Container: "rank"}, CPUs: n}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(uid string) (string, string) { return "hpc", "worker-" + uid[len(uid)-1:] }
	src := &stateSource{snap: report.SnapshotOf(alloc, 1, names), changed: make(chan struct{}, 1)}

	// The publisher acts as the agent's service account on the node (the node claim of its token,
	// which the finegrain-nrt-own-node policy checks), so the ClusterRole is what is tested.
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: agentUser, Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra: map[string][]string{nodeNameExtra: {node.Name}}}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := report.NewPublisher(report.PublisherConfig{
		Client: client, NodeName: node.Name, Topology: topo, Source: src, Options: report.Options{WholeCores: true},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pub.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("publisher: %v", err)
		}
	}()

	nrts := c.Dynamic.Resource(nrt.GroupVersionResource)
	var got *unstructured.Unstructured
	framework.Eventually(t, "the first NodeResourceTopology of "+node.Name, 10*time.Second, func(ctx context.Context) error {
		got, err = nrts.Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%w (publisher status %+v)", err, pub.Status())
		}
		return nil
	})
	want, err := report.Build(report.NodeRef{Name: node.Name, UID: node.UID}, topo, src.Snapshot(), report.Options{WholeCores: true})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := nrt.FromUnstructured(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Zones, stored.Zones); d != "" {
		t.Errorf("stored zones differ from the built ones (-built +stored):\n%s", d)
	}
	if d := cmp.Diff(want.Attributes, stored.Attributes); d != "" {
		t.Errorf("stored attributes differ (-built +stored):\n%s", d)
	}
	if refs := stored.OwnerReferences; len(refs) != 1 || refs[0].UID != node.UID || refs[0].Kind != "Node" {
		t.Errorf("ownerReferences = %+v, want the Node %s", refs, node.UID)
	}
	if i := slices.IndexFunc(stored.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == report.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
	}); i < 0 {
		t.Errorf("managedFields %+v lack an Apply entry of %s", stored.ManagedFields, report.FieldManager)
	}

	measureFreshness(t, nrts, node.Name, src, alloc, names)
	checkPlugin(t, c, node.Name, src.Snapshot())

	// The object goes with its Node (kube-controller-manager's garbage collector).
	if err := stop(); err != nil {
		t.Errorf("publisher: %v", err)
	}
	if err := c.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the garbage collector to delete NodeResourceTopology "+node.Name, time.Minute, func(ctx context.Context) error {
		_, err := nrts.Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// measureFreshness changes the state (release and re-pin a container) and times each change
// until a watch on the object shows its generation.
func measureFreshness(t *testing.T, nrts dynamic.NamespaceableResourceInterface, name string, src *stateSource, alloc *policy.Allocator, names report.NameFunc) {
	t.Helper()
	w, err := nrts.Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const rounds = 30
	var lat []time.Duration
	gen := src.Snapshot().Generation
	key := policy.Key{PodUID: "uid-9", Container: "rank"}
	for i := range rounds {
		if i%2 == 0 {
			if _, err := alloc.Allocate(policy.Request{Key: key, CPUs: 2}); err != nil {
				t.Fatal(err)
			}
		} else if _, ok := alloc.Release(key); !ok {
			t.Fatal("release failed")
		}
		gen++
		start := time.Now()
		src.set(report.SnapshotOf(alloc, gen, names))
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && generationOf(u) == gen {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-deadline:
				t.Fatalf("generation %d did not reach the API server within 5 s", gen)
			}
		}
		time.Sleep(150 * time.Millisecond) // past MinInterval, so each round is one change
	}
	slices.Sort(lat)
	t.Logf("freshness, state change to watch event of the NodeResourceTopology, %d changes: min %v, median %v, p90 %v, max %v",
		rounds, lat[0].Round(10*time.Microsecond), lat[rounds/2].Round(10*time.Microsecond), lat[rounds*9/10].Round(10*time.Microsecond), lat[rounds-1].Round(10*time.Microsecond))
	if lat[rounds-1] > time.Second {
		t.Errorf("slowest change took %v to publish; the contract is within a second", lat[rounds-1])
	}
}

// checkPlugin builds kubectl-finegrain, puts it on PATH and runs it through kubectl's plugin
// mechanism: its view of the object must be the publisher's state.
func checkPlugin(t *testing.T, c *framework.Cluster, name string, snap report.Snapshot) {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-finegrain"), "./cmd/kubectl-finegrain")
	build.Dir = c.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-finegrain: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := c.Kubectl(context.Background(), "finegrain", "node", name, "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got inspect.Pins
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := inspect.FromSnapshot(name, inspect.SourceNRT, snap, report.Options{WholeCores: true})
	want.ReservedCPUs, want.Fingerprint, want.UpdatedAt = "", got.Fingerprint, got.UpdatedAt
	for i := range want.NUMANodes {
		want.NUMANodes[i].FreeCores = nil
	}
	for i := range want.Containers {
		want.Containers[i].PodUID = ""
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kubectl finegrain node differs from the published state (-state +plugin):\n%s", d)
	}
	if got.UpdatedAt == nil || time.Since(*got.UpdatedAt) > time.Minute {
		t.Errorf("updatedAt %v is not the publisher's recent apply", got.UpdatedAt)
	}
	table, err := c.Kubectl(context.Background(), "finegrain", "nodes")
	if err != nil {
		t.Fatalf("%v\n%s", err, table)
	}
	t.Logf("kubectl finegrain nodes:\n%s", table)
}
