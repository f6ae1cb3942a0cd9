package nri

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	validator "github.com/containerd/nri/plugins/default-validator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cgroup/cgrouptest"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

const testNode = "node-a"

func init() {
	// The in-process runtime logs through NRI's global logger.
	nrilog.Set(stubLogger{slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// memStore is an in-memory checkpoint.
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
	return append([]byte(nil), s.data...), nil
}

func (s *memStore) Write(d []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = append([]byte(nil), d...)
	return nil
}

// recordingObserver counts what the plugin reports.
type recordingObserver struct {
	mu       sync.Mutex
	up       bool
	hooks    map[string]int
	refusals map[string]int
}

func (o *recordingObserver) Connected(up bool) { o.mu.Lock(); o.up = up; o.mu.Unlock() }
func (o *recordingObserver) Hook(event string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hooks[event]++
}
func (o *recordingObserver) Refused(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refusals[reason]++
}

func (o *recordingObserver) hooked(event string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hooks[event]
}

func (o *recordingObserver) refused(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refusals[reason]
}

// env is a real node agent (on a fake API server and fake cgroups) with its NRI plugin
// connected to an in-process NRI runtime: the adaptation package containerd embeds, listening on a
// socket in a temporary directory.
type env struct {
	t       testing.TB
	client  *fake.Clientset
	cg      *cgrouptest.Recorder
	agent   *agent.Agent
	plugin  *Plugin
	obs     *recordingObserver
	socket  string
	runtime *adaptation.Adaptation
	// running are the runtime's pods and containers, for Synchronize.
	mu       sync.Mutex
	pods     map[string]*api.PodSandbox
	ctrs     map[string]*api.Container
	unsolict [][]*api.ContainerUpdate
	// active is the runtime's count of registered plugins; builtin those it runs itself (the
	// default validator).
	active, builtin int
	stop            func()
}

// The env is the runtime's metrics sink, to learn when it registered the plugin (after the
// plugin's Synchronize returned).
var _ adaptation.Metrics = (*env)(nil)

func (e *env) RecordPluginInvocation(string, string, error)                                      {}
func (e *env) RecordPluginLatency(string, string, time.Duration)                                 {}
func (e *env) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {}
func (e *env) UpdatePluginCount(n int) {
	e.mu.Lock()
	e.active = n
	e.mu.Unlock()
}

// pluginRegistered reports whether the runtime consults the plugin.
func (e *env) pluginRegistered() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active == e.builtin+1
}

type envOpts struct {
	// validator configures the runtime's default validator; nil leaves it off.
	validator *validator.DefaultValidatorConfig
	// wrap lets a test interpose on the agent the plugin talks to.
	wrap func(Agent) Agent
	// noPlugin leaves the plugin out.
	noPlugin bool
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
	e := &env{t: t, client: fake.NewClientset(), cg: cgrouptest.NewRecorder(cgroup.V1),
		obs:  &recordingObserver{hooks: map[string]int{}, refusals: map[string]int{}},
		pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}}
	dir := t.TempDir()
	e.socket = filepath.Join(dir, "nri.sock")
	log := discardLog()
	opts := agent.DefaultOptions()
	opts.NodeName = testNode
	opts.Inotify = false
	opts.SyncDecisions = true
	opts.ReconcileInterval = 20 * time.Millisecond
	opts.StartupAPITimeout = 2 * time.Second
	// The recorder drops events: a benchmark allocates more often than any buffer holds.
	a, err := agent.NewFromDeps(opts, agent.Deps{Pods: e.client.CoreV1().Pods(""), Topology: testTopology(t), Writer: e.cg, Store: &memStore{},
		Recorder: &record.FakeRecorder{}, Log: log,
		KubeletPolicy: func() (kubeletpolicy.Result, error) { return kubeletpolicy.Result{Policy: "none"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	e.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	e.startRuntime(o.validator)
	if !o.noPlugin {
		var pa Agent = a
		if o.wrap != nil {
			pa = o.wrap(a)
		}
		popts := DefaultOptions()
		popts.SocketPath = e.socket
		popts.MinBackoff, popts.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
		p, err := New(popts, pa, e.obs, log)
		if err != nil {
			t.Fatal(err)
		}
		e.plugin = p
		wg.Go(func() { _ = p.Run(ctx) })
	}
	e.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(func() {
		e.stop()
		e.runtime.Stop()
	})
	if !o.noPlugin {
		e.waitConnected()
	}
	return e
}

// startRuntime starts an NRI runtime on the socket, as containerd does at its start.
func (e *env) startRuntime(cfg *validator.DefaultValidatorConfig) {
	e.t.Helper()
	dir := filepath.Dir(e.socket)
	opts := []adaptation.Option{adaptation.WithSocketPath(e.socket), adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")), adaptation.WithMetrics(e)}
	if cfg != nil {
		opts = append(opts, adaptation.WithDefaultValidator(cfg))
		e.builtin = 1
	}
	r, err := adaptation.New("containerd", "v2.4.2", e.sync, e.update, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.runtime = r
}

// sync hands a connecting plugin the runtime's pods and containers and applies its updates.
func (e *env) sync(ctx context.Context, cb adaptation.SyncCB) error {
	e.mu.Lock()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range e.pods {
		pods = append(pods, p)
	}
	for _, c := range e.ctrs {
		ctrs = append(ctrs, c)
	}
	e.mu.Unlock()
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	e.apply(updates)
	return nil
}

func (e *env) update(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	e.mu.Lock()
	e.unsolict = append(e.unsolict, u)
	e.mu.Unlock()
	e.apply(u)
	return nil, nil
}

// apply records updates in the runtime's containers, as containerd applies them with runc.
func (e *env) apply(updates []*api.ContainerUpdate) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, u := range updates {
		c := e.ctrs[u.GetContainerId()]
		if c == nil {
			continue
		}
		cpu := c.Linux.Resources.Cpu
		if v := u.GetLinux().GetResources().GetCpu().GetCpus(); v != "" {
			cpu.Cpus = v
		}
		if v := u.GetLinux().GetResources().GetCpu().GetMems(); v != "" {
			cpu.Mems = v
		}
	}
}

func (e *env) waitConnected() {
	e.t.Helper()
	e.eventually("the plugin to connect", func() bool { return e.plugin.Connected() && e.pluginRegistered() })
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var uidSeq int

// pod creates an API pod on the node with one container per CPU request and waits until the
// agent knows it; it returns the pod and its sandbox as the runtime describes it.
func (e *env) pod(name string, exclusive bool, requests ...string) (*corev1.Pod, *api.PodSandbox) {
	e.t.Helper()
	p, sb := newPod(name, exclusive, requests...)
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("the agent to know pod "+name, func() bool {
		for _, pi := range e.agent.Snapshot().Pods {
			if pi.UID == string(p.UID) {
				return true
			}
		}
		return false
	})
	e.runPod(sb)
	return p, sb
}

func newPod(name string, exclusive bool, requests ...string) (*corev1.Pod, *api.PodSandbox) {
	uidSeq++
	uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", uidSeq)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: testNode},
		Status:     corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed, Phase: corev1.PodPending},
	}
	sb := &api.PodSandbox{Id: fmt.Sprintf("sandbox-%d", uidSeq), Name: name, Namespace: "ns", Uid: uid,
		Labels: map[string]string{}, Annotations: map[string]string{configSourceAnnotation: sourceAPI}}
	if exclusive {
		p.Labels = map[string]string{classify.LabelPinning: classify.PinningExclusive}
		sb.Labels[classify.LabelPinning] = classify.PinningExclusive
	}
	for i, r := range requests {
		q := resource.MustParse(r)
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}, Limits: corev1.ResourceList{corev1.ResourceCPU: q}}})
	}
	return p, sb
}

func (e *env) runPod(sb *api.PodSandbox) {
	e.t.Helper()
	e.mu.Lock()
	e.pods[sb.Id] = sb
	e.mu.Unlock()
	if err := e.runtime.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: sb}); err != nil {
		e.t.Fatal(err)
	}
}

var idSeq int

// create asks the runtime to create container name of the sandbox, as containerd does for the
// kubelet's CreateContainer, with the full machine as the cpuset runc would otherwise use. A
// created container is recorded with what the adjustment gave it.
func (e *env) create(sb *api.PodSandbox, name string) (*api.Container, *api.CreateContainerResponse, error) {
	e.t.Helper()
	idSeq++
	ctr := &api.Container{Id: strings.Repeat(fmt.Sprintf("%x", idSeq%16), 60) + fmt.Sprintf("%04x", idSeq), PodSandboxId: sb.Id, Name: name,
		State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-7", Mems: "0-1"}}}}
	resp, err := e.runtime.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: sb, Container: ctr})
	if err != nil {
		return ctr, nil, err
	}
	if v := resp.GetAdjust().GetLinux().GetResources().GetCpu(); v != nil {
		if v.GetCpus() != "" {
			ctr.Linux.Resources.Cpu.Cpus = v.GetCpus()
		}
		if v.GetMems() != "" {
			ctr.Linux.Resources.Cpu.Mems = v.GetMems()
		}
	}
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	e.mu.Lock()
	e.ctrs[ctr.Id] = ctr
	e.mu.Unlock()
	e.apply(resp.GetUpdate())
	return ctr, resp, nil
}

// cpus returns what the runtime's container carries now.
func (e *env) cpus(ctr *api.Container) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctrs[ctr.Id].Linux.Resources.Cpu.Cpus
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runPlugin runs a plugin until the test ends.
func runPlugin(t *testing.T, p *Plugin) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
