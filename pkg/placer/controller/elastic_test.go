package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// fakeHooks records the rescale requests the controller sends; answer (nil: acknowledge) says
// what the hook does with one.
type fakeHooks struct {
	mu       sync.Mutex
	requests []v1alpha1.RescaleRequest
	answer   func(ctx context.Context, r v1alpha1.RescaleRequest) error
}

func (f *fakeHooks) Call(ctx context.Context, launcher *corev1.Pod, _ *v1alpha1.RescaleHook, body []byte) error {
	var r v1alpha1.RescaleRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if launcher.Status.PodIP == "" {
		return errors.New("called in a launcher without an address")
	}
	f.mu.Lock()
	f.requests = append(f.requests, r)
	answer := f.answer
	f.mu.Unlock()
	if answer != nil {
		return answer(ctx, r)
	}
	return nil
}

func (f *fakeHooks) calls() []v1alpha1.RescaleRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]v1alpha1.RescaleRequest(nil), f.requests...)
}

func (f *fakeHooks) setAnswer(a func(ctx context.Context, r v1alpha1.RescaleRequest) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = a
}

func (h *harness) hooks() *fakeHooks { return h.c.opts.Hooks.(*fakeHooks) }

// elasticSpec makes a job elastic without a rescale hook: moldable, its size chosen at start.
func elasticSpec(min, max int32) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) {
		s.Elastic = &v1alpha1.Elastic{MinReplicas: min, MaxReplicas: max, RescaleGapSeconds: 1}
	}
}

// hooked makes a job elastic with an HTTP rescale hook of a 1 s timeout.
func hooked(min, max int32) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) {
		elasticSpec(min, max)(s)
		s.Elastic.RescaleHook = &v1alpha1.RescaleHook{HTTP: &v1alpha1.HTTPRescaleHook{Port: 8080, Path: "/rescale"}, TimeoutSeconds: 1}
	}
}

func (h *harness) hostfileLines(job string) int {
	cm, err := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), job+"-hostfile", metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return strings.Count(cm.Data["hostfile"], "\n")
}

// runLauncher marks a job's launcher Running and Ready with an address, as the kubelet would.
func (h *harness) runLauncher(ns, job string) {
	h.eventually("launcher created", func() bool {
		_, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), v1alpha1.LauncherName(job), metav1.GetOptions{})
		return err == nil
	})
	h.updateStatus(ns, v1alpha1.LauncherName(job), func(s *corev1.PodStatus) {
		s.Phase, s.PodIP = corev1.PodRunning, "10.0.0.9"
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
}

// workerNames returns a job's live worker pods' names.
func (h *harness) workerNames(ns, job string) []string {
	var out []string
	for _, p := range h.pods(ns) {
		if p.Labels[v1alpha1.LabelJob] == job && p.Labels[v1alpha1.LabelRole] == v1alpha1.RoleWorker && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// eventsInOrder reports whether the recorded events contain each of subs, in that order.
func (h *harness) eventsInOrder(subs ...string) bool {
	all := h.rec.all()
	for _, s := range subs {
		i := strings.Index(all, s)
		if i < 0 {
			return false
		}
		all = all[i+len(s):]
	}
	return true
}

// An elastic job without a rescale hook is moldable: it starts with what fits and keeps that
// size — it neither grows when room appears nor is shrunk for a job of higher priority.
func TestElasticWithoutHookKeepsItsSize(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, elasticSpec(1, 4)))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "el") == v1alpha1.PhaseRunning })
	if s := h.job("hpc", "el").Status; s.Workers != 2 {
		t.Fatalf("started with %d workers, want the 2 that fit", s.Workers)
	}
	h.runLauncher("hpc", "el")
	in := st.Uniform("n", 2, 2, 9, 64)
	h.create(in.Nodes[1])
	h.create(in.Topologies[1])
	h.never("the moldable job grew", 300*time.Millisecond, func() bool {
		return h.job("hpc", "el").Status.Workers != 2 || len(h.workerNames("hpc", "el")) != 2
	})
	urgent := func(name string) {
		h.createJob(hpcJob(name, 8, func(s *v1alpha1.HPCJobSpec) { s.PriorityClassName = "urgent"; s.Profile = v1alpha1.ProfileNetwork }))
	}
	urgent("urgent-a")
	urgent("urgent-b")
	h.eventually("two urgent jobs fill the new node", func() bool {
		return h.phase("hpc", "urgent-a") == v1alpha1.PhaseRunning && h.phase("hpc", "urgent-b") == v1alpha1.PhaseRunning
	})
	urgent("urgent-c")
	h.eventually("a third waits", func() bool { return h.rec.find("Warning Unschedulable urgent-c") })
	h.never("the moldable job shrank", 300*time.Millisecond, func() bool {
		return h.job("hpc", "el").Status.Workers != 2 || len(h.workerNames("hpc", "el")) != 2
	})
	if calls := h.hooks().calls(); len(calls) != 0 {
		t.Errorf("hook calls %+v for a job without a hook", calls)
	}
}

// growScene: a running elastic job of 2 workers whose hook answers within timeout seconds, and a
// second node that gives it room to grow to 4. Tests that do not wait for the timeout give it a
// long one, so that a slow machine never lets it fire in their stead.
func growScene(t *testing.T, timeout int32) *harness {
	t.Helper()
	h := newHarness(t, testOptions(), append(cluster(1, 9), hpcJob("el", 32, func(s *v1alpha1.HPCJobSpec) {
		hooked(1, 4)(s)
		s.Elastic.RescaleHook.TimeoutSeconds = timeout
	}))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "el") == v1alpha1.PhaseRunning })
	h.runLauncher("hpc", "el")
	in := st.Uniform("n", 2, 2, 9, 64)
	h.create(in.Nodes[1])
	h.create(in.Topologies[1])
	return h
}

// An elastic job with a hook grows when room appears: the new workers are bound, then — once they
// are Ready — the hostfile of all workers is published and the hook called; only its
// acknowledgement makes the new size the job's.
func TestElasticExpandsThroughHook(t *testing.T) {
	h := growScene(t, 60)
	h.eventually("new workers bound, the growth waiting for them", func() bool {
		c := h.condition("hpc", "el", ConditionRescaling)
		return len(h.workerNames("hpc", "el")) == 4 && c != nil && c.Status == metav1.ConditionTrue
	})
	h.never("hook called before the new workers are Ready", 200*time.Millisecond, func() bool { return len(h.hooks().calls()) > 0 })
	if s := h.job("hpc", "el").Status; s.Workers != 2 || h.hostfileLines("el") != 2 {
		t.Fatalf("before the hook: %d workers, hostfile of %d; want 2 and 2", s.Workers, h.hostfileLines("el"))
	}
	for _, w := range h.workerNames("hpc", "el") {
		h.setReady("hpc", w)
	}
	h.eventually("expanded to 4", func() bool {
		s := h.job("hpc", "el").Status
		return s.Workers == 4 && len(s.Placements) == 4 && h.hostfileLines("el") == 4
	})
	calls := h.hooks().calls()
	if len(calls) != 1 {
		t.Fatalf("hook calls %+v, want one", calls)
	}
	r := calls[0]
	if r.Job != "hpc/el" || r.Direction != v1alpha1.RescaleExpand || r.FromWorkers != 2 || r.ToWorkers != 4 || len(r.Workers) != 4 ||
		strings.Count(r.Hostfile, "\n") != 4 || !strings.HasPrefix(r.Workers[3], "el-worker-3.") {
		t.Errorf("request %+v", r)
	}
	s := h.job("hpc", "el").Status
	if s.LastRescaleTime == nil || s.Nodes != 2 {
		t.Errorf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, ConditionScheduled); c == nil || c.Reason != ReasonRescaled || c.Message != "expanded from 2 to 4 workers" {
		t.Errorf("condition %+v", c)
	}
	if c := meta.FindStatusCondition(s.Conditions, ConditionRescaling); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRescaleAcknowledged {
		t.Errorf("Rescaling %+v", c)
	}
	if !h.eventsInOrder("Normal Rescaling el: bound 2 new workers", "Normal RescaleHookCalled el: published the hostfile of 4 workers; calling the rescale hook (POST 10.0.0.9:8080/rescale): expand from 2 to 4 workers",
		"Normal RescaleAcknowledged el: the rescale hook acknowledged: expand from 2 to 4 workers", "Normal Rescaled el: expanded from 2 to 4 workers") {
		t.Errorf("events:\n%s", h.rec.all())
	}
	h.eventually("rescale counted", func() bool { return h.metric(h.c.metrics.Rescales.WithLabelValues("expand")) == 1 })
}

// New workers that are not Ready within the hook's timeout are deleted again and the job keeps
// its size; the hook is never called.
func TestElasticGrowthTimesOut(t *testing.T) {
	h := growScene(t, 1)
	h.eventually("growth timed out", func() bool {
		c := h.condition("hpc", "el", ConditionRescaling)
		return c != nil && c.Reason == ReasonRescaleTimeout
	})
	want := "the new workers were not Ready within 1s (expand from 2 to 4 workers): 0 of 2 new workers Ready; the job keeps its 2 workers"
	if c := h.condition("hpc", "el", ConditionRescaling); c.Status != metav1.ConditionFalse || c.Message != want {
		t.Errorf("Rescaling %+v, want message %q", c, want)
	}
	h.eventually("the new workers are gone", func() bool { return len(h.workerNames("hpc", "el")) == 2 })
	if s := h.job("hpc", "el").Status; s.Workers != 2 || len(s.Placements) != 2 || h.hostfileLines("el") != 2 || s.Phase != v1alpha1.PhaseRunning {
		t.Errorf("after the timeout: %+v, hostfile of %d", s, h.hostfileLines("el"))
	}
	if !h.rec.find("Warning RescaleTimeout el: " + want) {
		t.Errorf("events:\n%s", h.rec.all())
	}
	if calls := h.hooks().calls(); len(calls) != 0 {
		t.Errorf("hook called %+v", calls)
	}
}

// A higher-priority gang that does not fit shrinks a lower-priority elastic job with a hook by
// just what it needs: the new hostfile is published, the hook called, and the leaving worker
// deleted once it acknowledged; the gang then starts.
func TestElasticShrinksThroughHook(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, hooked(1, 4)))...)
	h.eventually("elastic job at 4 workers", func() bool {
		return h.phase("hpc", "el") == v1alpha1.PhaseRunning && h.job("hpc", "el").Status.Workers == 4
	})
	h.runLauncher("hpc", "el")
	ack := make(chan struct{})
	h.hooks().setAnswer(func(ctx context.Context, r v1alpha1.RescaleRequest) error {
		select {
		case <-ack:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	h.createJob(hpcJob("urgent", 8, func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "urgent"
		s.Profile = v1alpha1.ProfileNetwork
	}))
	h.eventually("hook called", func() bool { return len(h.hooks().calls()) == 1 })
	if h.hostfileLines("el") != 3 || len(h.workerNames("hpc", "el")) != 4 || h.phase("hpc", "urgent") == v1alpha1.PhaseRunning {
		t.Errorf("before the acknowledgement: hostfile of %d, %d workers, urgent %s; want the new hostfile, all 4 workers, urgent waiting",
			h.hostfileLines("el"), len(h.workerNames("hpc", "el")), h.phase("hpc", "urgent"))
	}
	close(ack)
	h.eventually("urgent running", func() bool { return h.phase("hpc", "urgent") == v1alpha1.PhaseRunning })
	r := h.hooks().calls()[0]
	if r.Direction != v1alpha1.RescaleShrink || r.FromWorkers != 4 || r.ToWorkers != 3 || len(r.Workers) != 3 || strings.Contains(strings.Join(r.Workers, " "), "el-worker-3") {
		t.Errorf("request %+v", r)
	}
	s := h.job("hpc", "el").Status
	if s.Workers != 3 || len(s.Placements) != 3 || h.hostfileLines("el") != 3 || len(h.workerNames("hpc", "el")) != 3 {
		t.Errorf("elastic job after shrink: %d workers, %d placements, %d hostfile lines, pods %v; want 3", s.Workers, len(s.Placements), h.hostfileLines("el"), h.workerNames("hpc", "el"))
	}
	msg := "shrunk from 4 to 3 workers so that HPCJob hpc/urgent (priority 10) fits"
	if c := meta.FindStatusCondition(s.Conditions, ConditionScheduled); c == nil || c.Message != msg {
		t.Errorf("condition %+v", c)
	}
	if !h.eventsInOrder("Normal Rescaling el: shrinking from 4 to 3 workers so that HPCJob hpc/urgent (priority 10) fits",
		"Normal RescaleHookCalled el: published the hostfile of 3 workers; calling the rescale hook (POST 10.0.0.9:8080/rescale): shrink from 4 to 3 workers",
		"Normal RescaleAcknowledged el: the rescale hook acknowledged: shrink from 4 to 3 workers", "Normal Rescaled el: "+msg) {
		t.Errorf("events:\n%s", h.rec.all())
	}
	if h.metric(h.c.metrics.Rescales.WithLabelValues("shrink")) != 1 {
		t.Error("shrink not counted")
	}
	// A job of lower priority never shrinks it.
	h.createJob(hpcJob("meek", 8, func(s *v1alpha1.HPCJobSpec) { s.Priority = ptr.To[int32](-1) }))
	h.eventually("meek waits", func() bool { return h.rec.find("Warning Unschedulable meek") })
	h.never("the elastic job shrank for a lower priority", 300*time.Millisecond, func() bool { return len(h.hooks().calls()) != 1 })
}

// A hook that does not acknowledge within its timeout leaves the job at its size: the old
// hostfile is back, no worker goes, the Rescaling condition says why, and the gang waits.
func TestElasticShrinkTimesOut(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, func(s *v1alpha1.HPCJobSpec) {
		hooked(1, 4)(s)
		s.Elastic.RescaleGapSeconds = 2
	}))...)
	h.eventually("elastic job at 4 workers", func() bool { return h.job("hpc", "el").Status.Workers == 4 })
	h.runLauncher("hpc", "el")
	h.hooks().setAnswer(func(ctx context.Context, _ v1alpha1.RescaleRequest) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.createJob(hpcJob("urgent", 8, func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "urgent"
		s.Profile = v1alpha1.ProfileNetwork
	}))
	h.eventually("shrink timed out", func() bool {
		c := h.condition("hpc", "el", ConditionRescaling)
		return c != nil && c.Reason == ReasonRescaleTimeout
	})
	want := fmt.Sprintf("the rescale hook did not acknowledge within 1s (shrink from 4 to 3 workers): %v; the job keeps its 4 workers", context.DeadlineExceeded)
	if c := h.condition("hpc", "el", ConditionRescaling); c.Message != want {
		t.Errorf("Rescaling message %q, want %q", c.Message, want)
	}
	if !h.rec.find("Warning RescaleTimeout el: " + want) {
		t.Errorf("events:\n%s", h.rec.all())
	}
	h.never("the job lost a worker", 300*time.Millisecond, func() bool {
		s := h.job("hpc", "el").Status
		return s.Workers != 4 || len(s.Placements) != 4 || h.hostfileLines("el") != 4 || len(h.workerNames("hpc", "el")) != 4
	})
	if h.phase("hpc", "urgent") == v1alpha1.PhaseRunning || len(h.hooks().calls()) != 1 {
		t.Errorf("urgent %s after %d hook calls; want it waiting, the job inside its rescale gap", h.phase("hpc", "urgent"), len(h.hooks().calls()))
	}
}

// An elastic job that does not fit shrinks the running one until it can start at its maximum
// (newJob), not just at its minimum.
func TestElasticJobShrinksForItsMaximum(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, hooked(1, 4)))...)
	h.eventually("elastic job at 4 workers", func() bool { return h.job("hpc", "el").Status.Workers == 4 })
	h.runLauncher("hpc", "el")
	h.createJob(hpcJob("big", 16, func(s *v1alpha1.HPCJobSpec) {
		hooked(1, 2)(s)
		s.PriorityClassName = "urgent"
	}))
	h.eventually("big running", func() bool { return h.phase("hpc", "big") == v1alpha1.PhaseRunning })
	if r := h.hooks().calls(); len(r) != 1 || r[0].ToWorkers != 2 {
		t.Errorf("hook calls %+v, want one shrink to 2 workers", r)
	}
	if got := h.job("hpc", "big").Status.Workers; got != 2 {
		t.Errorf("big started with %d workers, want its maximum 2", got)
	}
}

// restartController replaces the harness's controller by a new one on the same API objects, as a
// restarted placer (or a new leader) would start.
func (h *harness) restartController() {
	h.t.Helper()
	h.stop()
	c, err := New(h.kube, h.dyn, h.rec, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), h.c.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.c, h.cancel, h.done = c, cancel, make(chan struct{})
	done := h.done
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			h.t.Errorf("Run: %v", err)
		}
	}()
}

// A placer that restarts while a growth waits for its new workers rolls it back: the new workers
// go, the hostfile is the job's again, and Rescaling says what happened.
func TestInterruptedGrowthIsRolledBack(t *testing.T) {
	h := growScene(t, 60)
	h.eventually("new workers bound, the growth waiting for them", func() bool {
		return len(h.workerNames("hpc", "el")) == 4 && h.condition("hpc", "el", ConditionRescaling) != nil
	})
	fresh := map[string]k8stypes.UID{}
	for _, p := range h.pods("hpc") {
		if p.Name == "el-worker-2" || p.Name == "el-worker-3" {
			fresh[p.Name] = p.UID
		}
	}
	want := "Warning RescaleInterrupted el: the placer restarted during a rescale; the job keeps its 2 workers (2 new workers deleted, its hostfile published again)"
	h.stop()
	if h.rec.find(want) || h.condition("hpc", "el", ConditionRescaling).Status != metav1.ConditionTrue {
		t.Fatal("the stopping placer rolled the growth back itself; only the next one may")
	}
	h.restartController()
	h.eventually("the growth rolled back", func() bool { return h.rec.find(want) })
	h.eventually("its new workers deleted", func() bool {
		for _, p := range h.pods("hpc") {
			if uid, ok := fresh[p.Name]; ok && p.UID == uid {
				return false
			}
		}
		return true
	})
	if s := h.job("hpc", "el").Status; s.Workers != 2 || h.hostfileLines("el") != 2 {
		t.Errorf("after the roll-back: %d workers, hostfile of %d; want 2", s.Workers, h.hostfileLines("el"))
	}
}

// completeJob: room that appears goes first to a waiting gang of higher priority that can start,
// and only what is left to the elastic job; a waiting gang that can never fit, however high its
// priority, does not hold the growth back.
func TestElasticGrowthYieldsOnlyToGangsThatFit(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 9), priorityClass("urgent", 10, false), hpcJob("el", 32, hooked(1, 4)))...)
	h.eventually("job running", func() bool { return h.phase("hpc", "el") == v1alpha1.PhaseRunning })
	h.runLauncher("hpc", "el")
	h.createJob(hpcJob("nowhere", 8, func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "urgent"
		s.Profile = v1alpha1.ProfileNetwork
		s.Worker.Spec.NodeSelector = map[string]string{"finegrain.dev/test": "no-such-node"}
	}))
	h.createJob(hpcJob("next", 8, func(s *v1alpha1.HPCJobSpec) {
		s.PriorityClassName = "urgent"
		s.Profile = v1alpha1.ProfileNetwork
	}))
	h.eventually("both urgent jobs waiting", func() bool {
		return h.rec.find("Warning Unschedulable nowhere") && h.rec.find("Warning Unschedulable next")
	})
	in := st.Uniform("n", 2, 2, 9, 64)
	h.create(in.Nodes[1])
	h.create(in.Topologies[1])
	h.eventually("the elastic job's new worker bound", func() bool { return len(h.workerNames("hpc", "el")) == 3 })
	for _, w := range h.workerNames("hpc", "el") {
		h.setReady("hpc", w)
	}
	h.eventually("next running and the elastic job grown into the rest", func() bool {
		return h.phase("hpc", "next") == v1alpha1.PhaseRunning && h.job("hpc", "el").Status.Workers == 3
	})
	if p := h.phase("hpc", "nowhere"); p == v1alpha1.PhaseRunning {
		t.Errorf("nowhere %s", p)
	}
	if r := h.hooks().calls(); len(r) != 1 || r[0].ToWorkers != 3 {
		t.Errorf("hook calls %+v, want one growth to 3", r)
	}
}
