package nri

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	validator "github.com/containerd/nri/plugins/default-validator"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent"
)

// TestCreatePinsAndNarrowsShared: a pinned container gets its exclusive CPUs and NUMA node in its
// adjustment; the shared containers already running are narrowed in the same reply; a shared
// container is created in the shared pool; the adjustments pass the plugin's own validation.
func TestCreatePinsAndNarrowsShared(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, web := e.pod("web", false, "500m", "250m")
	webCtr, resp, err := e.create(web, "c0")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); got != "0-7" {
		t.Errorf("shared container created on %q, want the whole shared pool 0-7", got)
	}
	_, worker := e.pod("worker", true, "2")
	wCtr, resp, err := e.create(worker, "c0")
	if err != nil {
		t.Fatalf("CreateContainer(worker) = %v", err)
	}
	cpus, err := cpuset.Parse(e.cpus(wCtr))
	if err != nil || cpus.Size() != 2 {
		t.Fatalf("worker created on %q, want 2 exclusive CPUs", e.cpus(wCtr))
	}
	mems := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetMems()
	if want := map[bool]string{true: "0", false: "1"}[cpus.IsSubsetOf(cpuset.New(0, 1, 2, 3))]; mems != want {
		t.Errorf("worker on CPUs %s got mems %q, want its NUMA node %s", cpus, mems, want)
	}
	if len(resp.GetUpdate()) != 1 || resp.GetUpdate()[0].GetContainerId() != webCtr.Id {
		t.Fatalf("updates %v, want the shared container narrowed", resp.GetUpdate())
	}
	shared, _ := cpuset.Parse(e.cpus(webCtr))
	if shared.Intersection(cpus).Size() != 0 || shared.Size() != 6 {
		t.Errorf("shared container on %s next to the pin %s", shared, cpus)
	}
	if got := e.agent.Snapshot().Pins; len(got) != 1 || !got[0].CPUs.Equals(cpus) {
		t.Errorf("agent pins %v, want the worker's %s", got, cpus)
	}
	// A second shared container starts in the narrowed pool; nothing else moves.
	side, resp, err := e.create(web, "c1")
	if err != nil || e.cpus(side) != shared.String() || len(resp.GetUpdate()) != 0 {
		t.Errorf("second shared container on %q (updates %v, err %v), want %s and no updates", e.cpus(side), resp.GetUpdate(), err, shared)
	}
	if n := e.obs.refused(RefusedValidation); n != 0 {
		t.Errorf("%d adjustments rejected by the plugin's validation", n)
	}
}

// TestTooLargeRefusedWithReason: a container asking for more CPUs than any NUMA node has is
// refused, and the error the kubelet puts in the pod's events says why and what to do.
func TestTooLargeRefusedWithReason(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, huge := e.pod("huge", true, "5")
	_, _, err := e.create(huge, "c0")
	if err == nil {
		t.Fatal("a 5-CPU container on 4-CPU NUMA nodes was created")
	}
	for _, want := range []string{`container "c0" of pod ns/huge`, "can never fit", "any single NUMA node", "lower the request"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if e.obs.refused(RefusedTooLarge) != 1 {
		t.Errorf("refusals %v, want one too-large", e.obs.refusals)
	}
}

// TestUnknownPinnedPodRefusedSharedPodAnswered: a pod the agent has not received yet waits for
// it at most the pod wait when it asks for exclusive CPUs, then is refused; an ordinary pod the
// agent does not know (or a static pod) goes to the shared pool at once.
func TestUnknownPinnedPodRefusedSharedPodAnswered(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.plugin.mu.Lock()
	e.plugin.podWait = 50 * time.Millisecond
	e.plugin.mu.Unlock()
	_, ghost := newPod("ghost", true, "1")
	e.runPod(ghost)
	start := time.Now()
	_, _, err := e.create(ghost, "c0")
	if err == nil || !strings.Contains(err.Error(), "has not received it from the API server") {
		t.Errorf("unknown pinned pod: %v, want a refusal saying the agent has not received the pod", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > time.Second {
		t.Errorf("the refusal took %s, want the 50ms pod wait", took)
	}
	_, static := newPod("static", true, "1")
	static.Annotations[configSourceAnnotation] = "file"
	e.runPod(static)
	ctr, _, err := e.create(static, "c0")
	if err != nil || e.cpus(ctr) != "0-7" {
		t.Errorf("static pod container on %q (%v), want the shared pool", e.cpus(ctr), err)
	}
}

// TestUpdateKeepsPin: an in-place resize through UpdateContainer keeps the pinned container on its
// CPUs, whatever cpuset the kubelet sends.
func TestUpdateKeepsPin(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, worker := e.pod("worker", true, "1")
	ctr, _, err := e.create(worker, "c0")
	if err != nil {
		t.Fatal(err)
	}
	pin := e.cpus(ctr)
	resp, err := e.runtime.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: worker, Container: ctr,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-7", Quota: api.Int64(200000), Period: api.UInt64(100000)}}})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, u := range resp.GetUpdate() {
		if u.GetContainerId() == ctr.Id {
			got = u.GetLinux().GetResources().GetCpu().GetCpus()
			if q := u.GetLinux().GetResources().GetCpu().GetQuota().GetValue(); q != 200000 {
				t.Errorf("the kubelet's new quota became %d", q)
			}
		}
	}
	if got != pin {
		t.Errorf("after UpdateContainer the worker gets %q, want its pin %s", got, pin)
	}
}

// TestRemovePodSandboxReleases: removing a pod's sandbox returns its CPUs to the shared pool.
func TestRemovePodSandboxReleases(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, worker := e.pod("worker", true, "2")
	if _, _, err := e.create(worker, "c0"); err != nil {
		t.Fatal(err)
	}
	if err := e.runtime.RemovePodSandbox(context.Background(), &api.RemovePodSandboxRequest{Pod: worker}); err != nil {
		t.Fatal(err)
	}
	if pins := e.agent.Snapshot().Pins; len(pins) != 0 {
		t.Errorf("pins after the sandbox's removal: %v", pins)
	}
}

// TestSynchronizePinsContainersCreatedWithoutPlugin: containers created while the plugin was away
// are moved to their decisions when it connects.
func TestSynchronizePinsContainersCreatedWithoutPlugin(t *testing.T) {
	e := newEnv(t, envOpts{noPlugin: true})
	_, web := e.pod("web", false, "250m")
	_, worker := e.pod("worker", true, "1")
	webCtr, _, err := e.create(web, "c0")
	if err != nil {
		t.Fatal(err)
	}
	wCtr, _, err := e.create(worker, "c0")
	if err != nil {
		t.Fatal(err)
	}
	if e.cpus(wCtr) != "0-7" {
		t.Fatalf("without the plugin the worker got %q", e.cpus(wCtr))
	}
	p, err := New(Options{SocketPath: e.socket, PluginName: DefaultPluginName, PluginIndex: DefaultPluginIndex, PodWait: time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, e.agent, e.obs, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	e.plugin = p
	runPlugin(t, p)
	e.waitConnected()
	pin, err := cpuset.Parse(e.cpus(wCtr))
	if err != nil || pin.Size() != 1 {
		t.Fatalf("worker after Synchronize on %q, want one exclusive CPU", e.cpus(wCtr))
	}
	shared, _ := cpuset.Parse(e.cpus(webCtr))
	if shared.Size() != 7 || shared.Intersection(pin).Size() != 0 {
		t.Errorf("shared container after Synchronize on %s next to pin %s", shared, pin)
	}
}

// TestReconnectsAfterRuntimeRestart: the runtime goes away and comes back on the same socket
// (containerd restarted); the plugin reconnects on its own and pins again.
func TestReconnectsAfterRuntimeRestart(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.runtime.Stop()
	// A stopped in-process runtime keeps its connections open; a runtime process that exits
	// closes them. Close the plugin's end, as that exit would.
	e.plugin.mu.Lock()
	s := e.plugin.stub
	e.plugin.mu.Unlock()
	s.Stop()
	e.eventually("the plugin to notice", func() bool { return !e.plugin.Connected() })
	time.Sleep(100 * time.Millisecond) // a few failed attempts on the missing socket
	e.startRuntime(nil)
	e.waitConnected()
	_, worker := e.pod("worker", true, "1")
	ctr, _, err := e.create(worker, "c0")
	if err != nil {
		t.Fatal(err)
	}
	if pin, _ := cpuset.Parse(e.cpus(ctr)); pin.Size() != 1 {
		t.Errorf("after the reconnection the worker got %q", e.cpus(ctr))
	}
}

// blockingAgent hangs Decide until released: a plugin that stopped answering.
type blockingAgent struct {
	Agent
	mu      sync.Mutex
	blocked chan struct{}
}

func (b *blockingAgent) Decide(ctx context.Context, req agent.ContainerRequest) (agent.Decision, error) {
	b.mu.Lock()
	ch := b.blocked
	b.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return b.Agent.Decide(ctx, req)
}

// TestFailClosed: with the default validator requiring the plugin, a container is refused while
// the plugin is absent (unless its pod tolerates that), and a plugin that hangs in
// CreateContainer makes the runtime refuse the container instead of creating it unpinned.
func TestFailClosed(t *testing.T) {
	cfg := &validator.DefaultValidatorConfig{Enable: true, RequiredPlugins: []string{DefaultPluginName}, TolerateMissingAnnotation: TolerateMissingAnnotation}
	t.Run("absent", func(t *testing.T) {
		e := newEnv(t, envOpts{validator: cfg, noPlugin: true})
		_, worker := e.pod("worker", true, "1")
		if _, _, err := e.create(worker, "c0"); err == nil || !strings.Contains(err.Error(), `required plugin "finegrain" not present`) {
			t.Errorf("create without the plugin = %v, want the validator's refusal", err)
		}
		_, agentPod := newPod("nodeagent", false, "20m")
		agentPod.Annotations[TolerateMissingAnnotation] = "true"
		e.runPod(agentPod)
		if _, _, err := e.create(agentPod, "c0"); err != nil {
			t.Errorf("create of a tolerating pod without the plugin = %v", err)
		}
	})
	t.Run("hung", func(t *testing.T) {
		adaptation.SetPluginRequestTimeout(300 * time.Millisecond)
		defer adaptation.SetPluginRequestTimeout(adaptation.DefaultPluginRequestTimeout)
		var hang *blockingAgent
		e := newEnv(t, envOpts{validator: cfg, wrap: func(a Agent) Agent { hang = &blockingAgent{Agent: a}; return hang }})
		_, worker := e.pod("worker", true, "1")
		release := make(chan struct{})
		hang.mu.Lock()
		hang.blocked = release
		hang.mu.Unlock()
		_, _, err := e.create(worker, "c0")
		close(release)
		if err == nil {
			t.Fatal("a container was created while the plugin hung")
		}
		hang.mu.Lock()
		hang.blocked = nil
		hang.mu.Unlock()
		// The runtime dropped the plugin; it reconnects and pins the next attempt.
		e.eventually("the plugin to reconnect", func() bool {
			return e.plugin.Connected() && e.obs.hooked(EventSynchronize) >= 2 && e.pluginRegistered()
		})
		ctr, _, err := e.create(worker, "c0")
		if err != nil {
			t.Fatalf("create after the reconnection = %v", err)
		}
		if pin, _ := cpuset.Parse(e.cpus(ctr)); pin.Size() != 1 {
			t.Errorf("retried worker got %q", e.cpus(ctr))
		}
	})
}
