package agent

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cgroup/cgrouptest"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

const node = "node-a"

// memStore is an in-memory checkpoint store whose writes can be made to fail.
type memStore struct {
	mu     sync.Mutex
	data   []byte
	fail   error
	writes int
}

func (s *memStore) Read() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil, fmt.Errorf("read checkpoint: %w", fs.ErrNotExist)
	}
	return append([]byte(nil), s.data...), nil
}

func (s *memStore) Write(d []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.writes++
	s.data = append([]byte(nil), d...)
	return nil
}

// fakeResolver answers like a CRI runtime from a map.
type fakeResolver struct {
	mu    sync.Mutex
	ids   map[string]cri.Identity
	calls int
}

func (r *fakeResolver) Resolve(_ context.Context, id cgroup.ContainerID) (cri.Identity, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if i, ok := r.ids[id.ID]; ok {
		return i, nil
	}
	return cri.Identity{}, fmt.Errorf("container %s: %w", id, cri.ErrNotFound)
}

func (r *fakeResolver) set(id string, i cri.Identity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = i
}

// chanWatcher is a Watcher whose events the test sends.
type chanWatcher struct{ ch chan cgwatch.Event }

func (w *chanWatcher) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (w *chanWatcher) Events() <-chan cgwatch.Event  { return w.ch }

// countingHooks records hook calls.
type countingHooks struct {
	NopHooks
	mu       sync.Mutex
	pins     []Path
	repairs  int
	failures map[ErrorReason]int
	ckpt     int
	confined int
}

func (h *countingHooks) PinWritten(p Path, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pins = append(h.pins, p)
}
func (h *countingHooks) DriftRepaired(cgroup.ContainerRef) { h.mu.Lock(); h.repairs++; h.mu.Unlock() }
func (h *countingHooks) SlurmProcessesConfined(n int)      { h.mu.Lock(); h.confined += n; h.mu.Unlock() }
func (h *countingHooks) Failed(r ErrorReason) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures[r]++
}
func (h *countingHooks) CheckpointWritten(_ time.Duration, err error) {
	if err == nil {
		h.mu.Lock()
		h.ckpt++
		h.mu.Unlock()
	}
}

// env is one agent under test with every fake it talks to.
type env struct {
	t        testing.TB
	a        *Agent
	client   *fake.Clientset
	cg       *cgrouptest.Recorder
	store    *memStore
	resolver *fakeResolver
	events   *record.FakeRecorder
	hooks    *countingHooks
	kubelet  *kubeletStub
}

type kubeletStub struct {
	mu     sync.Mutex
	policy string
}

func (k *kubeletStub) read() (kubeletpolicy.Result, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return kubeletpolicy.Result{Socket: "/var/lib/kubelet/pod-resources/kubelet.sock", Policy: k.policy}, nil
}

type envOpts struct {
	noResolver bool
	store      *memStore
	cg         *cgrouptest.Recorder
	objects    []*corev1.Pod
	modify     func(*Options)
	// client adjusts the fake clientset before the informer starts.
	client func(*fake.Clientset)
	// run leaves the informer to Agent.Run.
	run bool
	// procs lists container processes (Deps.Processes).
	procs ProcessReader
	// hintGuard is Deps.NUMAHintGuard.
	hintGuard func(context.Context) error
	// io, ioDevices and objectives are the I/O limit parts of Deps.
	io         IOLimiter
	ioDevices  []cgroup.Device
	objectives ObjectiveSource
}

// testTopology has two NUMA nodes of four single-thread cores: 0-3 and 4-7.
func testTopology(t testing.TB) *topology.Topology {
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 1, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{t: t, store: o.store, cg: o.cg, events: record.NewFakeRecorder(1000),
		hooks: &countingHooks{failures: map[ErrorReason]int{}}, kubelet: &kubeletStub{policy: "none"}}
	if e.store == nil {
		e.store = &memStore{}
	}
	if e.cg == nil {
		e.cg = cgrouptest.NewRecorder(cgroup.V1)
	}
	e.client = fake.NewClientset()
	for _, p := range o.objects {
		if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if o.client != nil {
		o.client(e.client)
	}
	opts := DefaultOptions()
	opts.NodeName = node
	opts.StartupAPITimeout = 2 * time.Second
	opts.Hooks = e.hooks
	if o.modify != nil {
		o.modify(&opts)
	}
	d := Deps{Pods: e.client.CoreV1().Pods(""), Topology: testTopology(t), Writer: e.cg, Store: e.store, Recorder: e.events,
		KubeletPolicy: e.kubelet.read, Processes: o.procs, NUMAHintGuard: o.hintGuard, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		IO: o.io, IODevices: o.ioDevices, Objectives: o.objectives}
	if !o.noResolver {
		e.resolver = &fakeResolver{ids: map[string]cri.Identity{}}
		d.Resolver = e.resolver
	}
	a, err := NewFromDeps(opts, d)
	if err != nil {
		t.Fatal(err)
	}
	e.a = a
	if o.run {
		return e
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.informer.Run(ctx.Done()); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// start runs the first tick, which rebuilds the state.
func (e *env) start() Report {
	e.t.Helper()
	rep := e.a.Tick(context.Background())
	if err := e.a.Ready(); err != nil {
		e.t.Fatalf("not ready after the first tick: %v", err)
	}
	return rep
}

// apply creates or updates a pod and waits until the agent's queue holds it.
func (e *env) apply(p *corev1.Pod) {
	e.t.Helper()
	ctx := context.Background()
	pods := e.client.CoreV1().Pods(p.Namespace)
	var err error
	if _, gerr := pods.Get(ctx, p.Name, metav1.GetOptions{}); gerr == nil {
		_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	} else {
		_, err = pods.Create(ctx, p, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitQueued(p, false)
}

func (e *env) remove(p *corev1.Pod) {
	e.t.Helper()
	if err := e.client.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitQueued(p, true)
}

// waitQueued waits until the informer handed the pod's latest version to the agent.
func (e *env) waitQueued(p *corev1.Pod, deleted bool) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		e.a.queue.mu.Lock()
		i, ok := e.a.queue.pending[string(p.UID)]
		ok = ok && e.a.queue.events[i].deleted == deleted && (deleted ||
			e.a.queue.events[i].pod.Status.Phase == p.Status.Phase && len(e.a.queue.events[i].pod.Status.ContainerStatuses) == len(p.Status.ContainerStatuses))
		e.a.queue.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("the informer did not deliver pod %s within 5 s", p.Name)
}

// container makes a container cgroup exist in the fake with the full machine's cpuset, as runc
// leaves it, and returns its ref.
func (e *env) container(p *corev1.Pod, id string) cgroup.ContainerRef {
	e.t.Helper()
	ref, err := cgroup.NewContainerRef(string(p.UID), string(p.Status.QOSClass), "containerd://"+id)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cg.Add(ref, cgroup.Resources{CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), Mems: cpuset.New(0, 1)})
	return ref
}

func vanished(ref cgroup.ContainerRef) cgwatch.Event {
	return cgwatch.Event{Kind: cgwatch.Vanished, Time: time.Now(),
		Loc: cgroup.Location{Level: cgroup.LevelContainer, QOS: ref.Pod.QOS, Pod: ref.Pod.UID, Container: ref.Container}}
}

func (e *env) appeared(ref cgroup.ContainerRef) Report {
	return e.a.CgroupEvent(context.Background(), cgwatch.Event{Kind: cgwatch.Appeared, Time: time.Now(),
		Loc: cgroup.Location{Level: cgroup.LevelContainer, QOS: ref.Pod.QOS, Pod: ref.Pod.UID, Container: ref.Container}})
}

// cpus returns what a container's cgroup carries.
func (e *env) cpus(ref cgroup.ContainerRef) (cpuset.CPUSet, cpuset.CPUSet) {
	e.t.Helper()
	s, err := e.cg.Read(ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CPUs, s.Mems
}

// eventsWith drains the fake recorder and returns the events containing s.
func (e *env) eventsWith(s string) []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			if strings.Contains(ev, s) {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

var uidSeq int

// newPod returns a Guaranteed pod bound to node with one container per CPU request given.
func newPod(name string, labels map[string]string, requests ...string) *corev1.Pod {
	uidSeq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", uidSeq)), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed, Phase: corev1.PodPending},
	}
	for i, r := range requests {
		q := resource.MustParse(r)
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}, Limits: corev1.ResourceList{corev1.ResourceCPU: q}}})
	}
	return p
}

var exclusiveLabel = map[string]string{classify.LabelPinning: classify.PinningExclusive}

// hexID returns a container ID made of one repeated hex digit.
func hexID(c byte) string { return strings.Repeat(string(c), 64) }

// withStatus reports the pod's first container as running with the given runtime ID.
func withStatus(p *corev1.Pod, ids ...string) *corev1.Pod {
	q := p.DeepCopy()
	q.Status.Phase = corev1.PodRunning
	q.Status.ContainerStatuses = nil
	for i, id := range ids {
		q.Status.ContainerStatuses = append(q.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: q.Spec.Containers[i].Name, ContainerID: "containerd://" + id,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	return q
}

func assignmentsOf(a *Agent) []policy.Assignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.alloc.Assignments()
}

func sharedOf(a *Agent) cpuset.CPUSet {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.alloc.SharedCPUs()
}
