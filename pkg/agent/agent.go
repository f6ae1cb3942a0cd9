package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent/cgwatch"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Store keeps the checkpoint's bytes (pkg/checkpoint.File).
type Store interface {
	Read() ([]byte, error)
	Write(data []byte) error
}

// Watcher reports container cgroups appearing and vanishing (cgwatch.Watcher).
type Watcher interface {
	Run(ctx context.Context) error
	Events() <-chan cgwatch.Event
}

// PodClient lists and watches the pods of every namespace. client-go's typed
// CoreV1().Pods("") satisfies it, and so does the small REST client New builds (which keeps
// client-go's full clientset, and every API group it registers, out of the agent's binary).
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Deps are the agent's connections to the host and the cluster. New builds the real ones; tests
// pass fakes.
type Deps struct {
	Pods     PodClient
	Topology *topology.Topology
	Writer   cgroup.Writer
	Store    Store
	// Resolver names containers through the CRI runtime; nil uses pod statuses only.
	Resolver cri.Resolver
	// Watcher is the inotify fast path; nil disables it.
	Watcher Watcher
	// Processes lists what runs in a container's cgroup; nil disables Agent.Processes.
	Processes ProcessReader
	// Mover and SlurmProcesses (slurm.ReadProcesses on the agent's procfs) confine Slurm jobs'
	// processes to their placeholders' pinned containers (ConfineSlurmJobs, which also needs
	// Processes); nil disables it.
	Mover          ProcessMover
	SlurmProcesses func(pids []int) ([]slurm.Process, error)
	// Recorder sends events to the API server.
	Recorder record.EventRecorder
	// KubeletPolicy reads the kubelet's CPU manager policy.
	KubeletPolicy func() (kubeletpolicy.Result, error)
	// NUMAHintGuard says whether the admission policy that keeps the placer's NUMA node hint to
	// the placer is in force (nil error) or why not (HintPolicyGuard); nil trusts every hint on a
	// pod that names the placer as its scheduler.
	NUMAHintGuard func(context.Context) error
	// IO writes the pods' I/O bandwidth limits on IODevices (the node's whole disks, from
	// pkg/blockdev) as Objectives decide; any of the three nil or empty disables I/O limits.
	IO         IOLimiter
	IODevices  []cgroup.Device
	Objectives ObjectiveSource
	Log        *slog.Logger
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Agent is the node agent's core.
type Agent struct {
	opts  Options
	d     Deps
	log   *slog.Logger
	hooks Hooks
	// mems are the memory nodes shared containers may use.
	mems     cpuset.CPUSet
	informer cache.SharedIndexInformer
	// podsSynced is true once the handlers received the first pod list.
	podsSynced cache.InformerSynced
	queue      *podQueue
	// kick tells the loop that Decide or ReleasePod changed the state.
	kick chan struct{}
	// closers release what New opened.
	closers []func()

	mu        sync.Mutex
	st        *state
	subs      map[chan struct{}]struct{}
	waiters   map[string]chan struct{}
	refusing  string
	started   bool
	startedCh chan struct{}
	apiSynced bool

	// hintsDistrusted is why no NUMA node hint is honoured ("" while they are: checkHints).
	hintsDistrusted atomic.Value
	// heartbeat is when the loop last ran; ticks counts Tick calls (loop-only). The rest is
	// guarded by mu.
	heartbeat        atomic.Int64
	ticks            int
	lastKubeletCheck time.Time
	kubeletErr       string
	enumErr          string
	ckptFailing      bool
	// ioPods is each pod's I/O limit (loop-only).
	ioPods map[string]*ioPod
	// slurmReported holds the Slurm jobs without a placeholder already reported, slurmErrs the
	// confinement errors logged at the last tick (loop-only).
	slurmReported, slurmErrs map[string]bool
}

// Report is what one step of the agent did; tests assert on it.
type Report struct {
	Allocated []policy.Assignment
	Released  []policy.Assignment
	// Pinned are exclusive containers whose cpuset (cpus or mems) was written; Shared the shared
	// containers whose cgroup was written.
	Pinned []cgroup.ContainerRef
	Shared []cgroup.ContainerRef
	// Repaired are containers whose cgroup had drifted from what the agent wrote.
	Repaired []cgroup.ContainerRef
	// Vanished are containers whose cgroup is gone.
	Vanished []cgroup.ContainerRef
	Errors   []error
}

func (r *Report) merge(o Report) {
	r.Allocated = append(r.Allocated, o.Allocated...)
	r.Released = append(r.Released, o.Released...)
	r.Pinned = append(r.Pinned, o.Pinned...)
	r.Shared = append(r.Shared, o.Shared...)
	r.Repaired = append(r.Repaired, o.Repaired...)
	r.Vanished = append(r.Vanished, o.Vanished...)
	r.Errors = append(r.Errors, o.Errors...)
}

// NewFromDeps builds an agent from ready-made parts.
func NewFromDeps(opts Options, d Deps) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	switch {
	case d.Pods == nil || d.Topology == nil || d.Writer == nil || d.Store == nil || d.Recorder == nil || d.KubeletPolicy == nil || d.Log == nil:
		return nil, errors.New("agent dependencies: pod client, topology, writer, store, recorder, kubelet policy reader and logger are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	a := &Agent{
		opts:    opts,
		d:       d,
		log:     d.Log,
		hooks:   opts.Hooks,
		queue:   newPodQueue(),
		kick:    make(chan struct{}, 1),
		subs:    map[chan struct{}]struct{}{},
		waiters: map[string]chan struct{}{},

		slurmReported: map[string]bool{},

		startedCh: make(chan struct{}),
	}
	if a.hooks == nil {
		a.hooks = NopHooks{}
	}
	var mems []int
	for _, n := range d.Topology.NUMANodes {
		if n.MemoryBytes > 0 || len(d.Topology.NUMANodes) == 1 {
			mems = append(mems, int(n.ID))
		}
	}
	a.mems = cpuset.New(mems...)
	if _, err := policy.New(d.Topology, a.policyConfig()); err != nil {
		return nil, fmt.Errorf("CPU pools: %w", err)
	}
	a.informer = cache.NewSharedIndexInformer(nodePods(d.Pods, opts.NodeName), &corev1.Pod{}, 0, cache.Indexers{})
	if err := a.informer.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	reg, err := a.informer.AddEventHandler(a.handlers())
	if err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	a.podsSynced = reg.HasSynced
	a.heartbeat.Store(d.Now().UnixNano())
	return a, nil
}

func (a *Agent) policyConfig() policy.Config {
	return policy.Config{ReservedCPUs: a.opts.ReservedCPUs, MinSharedCPUs: a.opts.MinSharedCPUs}
}

// Run runs the agent until ctx is done: the pod informer, the cgroup watcher and the loop that
// starts (once the kubelet's CPU manager allows it), then handles events and repairs drift.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.informer.Run(ctx.Done())
	}()
	var events <-chan cgwatch.Event
	if a.d.Watcher != nil {
		events = a.d.Watcher.Events()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.d.Watcher.Run(ctx); err != nil {
				a.log.Error("cgroup watcher stopped; new containers are found by the periodic scan", "reason", err.Error())
			}
		}()
	}
	var objChanged <-chan struct{}
	if a.ioEnabled() {
		objChanged = a.d.Objectives.Changed()
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.d.Objectives.Run(ctx)
		}()
	}
	ticker := time.NewTicker(a.opts.ReconcileInterval)
	defer ticker.Stop()
	// Slurm jobs' new steps are confined between ticks too: their tasks wait for it.
	var confine <-chan time.Time
	if a.confineEnabled() && a.opts.SlurmConfineInterval < a.opts.ReconcileInterval {
		t := time.NewTicker(a.opts.SlurmConfineInterval)
		defer t.Stop()
		confine = t.C
	}
	a.Tick(ctx)
	for {
		// New containers come first: a pin waits for no drift check or pod update.
		events = a.drainCgroupEvents(ctx, events)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			a.Tick(ctx)
		case <-confine:
			if a.isStarted() {
				a.ConfineSlurmJobs()
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if a.isStarted() {
				a.CgroupEvent(ctx, ev)
			}
		case <-a.queue.ready:
			if a.isStarted() {
				a.DrainPods(ctx)
			}
		case <-a.kick:
			if a.isStarted() {
				a.enforce(ctx, target{all: true})
			}
		case <-objChanged:
			if a.isStarted() {
				a.enforceIO(ctx, false)
			}
		}
		a.heartbeat.Store(a.d.Now().UnixNano())
	}
}

// drainCgroupEvents handles the watcher's pending events without waiting; it returns nil once
// the watcher has closed its channel.
func (a *Agent) drainCgroupEvents(ctx context.Context, events <-chan cgwatch.Event) <-chan cgwatch.Event {
	for events != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if a.isStarted() {
				a.CgroupEvent(ctx, ev)
			}
		default:
			return events
		}
	}
	return nil
}

func (a *Agent) isStarted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started && a.refusing == ""
}

// notify tells subscribers the state changed and bumps the generation; a.mu must be held.
func (a *Agent) notify() {
	a.st.gen++
	for ch := range a.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// kickLoop asks the loop to enforce the state; it never blocks.
func (a *Agent) kickLoop() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}
