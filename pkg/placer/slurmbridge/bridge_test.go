package slurmbridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// fakeSlurm is a slurmctld as the bridge sees it: its jobs, and the commands it was given.
type fakeSlurm struct {
	jobs  map[slurm.JobID]*slurm.Job
	calls []string
}

func (f *fakeSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	var out []slurm.Job
	for _, j := range f.jobs {
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b slurm.Job) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

func (f *fakeSlurm) Start(_ context.Context, id slurm.JobID, nodes []string) error {
	f.calls = append(f.calls, fmt.Sprintf("start %s on %s", id, strings.Join(nodes, ",")))
	j := f.jobs[id]
	j.Priority, j.Reason, j.RequiredNodes = 1, "None", strings.Join(nodes, ",")
	return nil
}

func (f *fakeSlurm) SetComment(_ context.Context, id slurm.JobID, text string) error {
	f.calls = append(f.calls, fmt.Sprintf("comment %s %q", id, text))
	f.jobs[id].Comment = text
	return nil
}

func (f *fakeSlurm) Hold(_ context.Context, id slurm.JobID) error {
	f.calls = append(f.calls, "hold "+id.String())
	j := f.jobs[id]
	j.Priority, j.Reason = 0, slurm.ReasonHeldAdmin
	return nil
}

func (f *fakeSlurm) RequeueHold(_ context.Context, id slurm.JobID) error {
	f.calls = append(f.calls, "requeuehold "+id.String())
	j := f.jobs[id]
	j.State, j.Priority, j.Reason = slurm.StatePending, 0, slurm.ReasonHeldAdmin
	return nil
}

// fakePins says a pod is pinned once the test pins it.
type fakePins map[string]string

func (f fakePins) Pinned(_ context.Context, node string, p *corev1.Pod, container string) (string, bool, error) {
	cpus, ok := f[node+"/"+p.Name+"/"+container]
	return cpus, ok, nil
}

// fakeWaits is what the placer said about a pod.
type fakeWaits map[string]string

func (f fakeWaits) Why(_ context.Context, p *corev1.Pod) (string, error) { return f[p.Name], nil }

type harness struct {
	t     *testing.T
	kube  *fake.Clientset
	dyn   *dynamicfake.FakeDynamicClient
	slurm *fakeSlurm
	pins  fakePins
	waits fakeWaits
	b     *Bridge
	cl    *Cluster
}

func newHarness(t *testing.T, jobs ...slurm.Job) *harness {
	h := &harness{t: t, kube: fake.NewClientset(), slurm: &fakeSlurm{jobs: map[slurm.JobID]*slurm.Job{}}, pins: fakePins{}, waits: fakeWaits{}}
	for i := range jobs {
		h.slurm.jobs[jobs[i].ID] = &jobs[i]
	}
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{schedv1alpha1.GroupVersionResource: "PodGroupList"})
	opts := DefaultOptions()
	opts.Placement = v1alpha1.MostLoaded
	h.b = New(h.kube, h.dyn, h.pins, h.waits, slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
	h.cl = &Cluster{Namespace: "hpc", Name: "vc1", UID: "vc-uid", Slurm: h.slurm, Nodes: map[string]string{"k2": "k2", "k1": "k1", "k3": "k3"}}
	return h
}

// sync runs one pass and checks what it did.
func (h *harness) sync(want map[slurm.JobID][]Action) {
	h.t.Helper()
	got, err := h.b.Sync(context.Background(), h.cl)
	if err != nil {
		h.t.Fatal(err)
	}
	if want == nil {
		want = map[slurm.JobID][]Action{}
	}
	if d := cmp.Diff(want, got); d != "" {
		h.t.Fatalf("actions (-want +got):\n%s", d)
	}
}

func (h *harness) pods() []corev1.Pod {
	h.t.Helper()
	l, err := h.kube.CoreV1().Pods("hpc").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return l.Items
}

func (h *harness) podGroups() []string {
	h.t.Helper()
	l, err := h.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace("hpc").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, u := range l.Items {
		names = append(names, u.GetName())
	}
	return names
}

// bind does what the placer and the kubelet do: the pod is on node, running.
func (h *harness) bind(name, node string) {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods("hpc").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	if _, err := h.kube.CoreV1().Pods("hpc").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func heldJob(id slurm.JobID, nodes, cpus int, memPerCPU int64) slurm.Job {
	return slurm.Job{ID: id, State: slurm.StatePending, Reason: slurm.ReasonHeldUser, Nodes: nodes, Tasks: cpus, CPUs: cpus,
		MinCPUsPerNode: 1, MemoryPerCPU: memPerCPU, AdminComment: "finegrain"}
}

// A held job of two nodes and four CPUs becomes a PodGroup of two Guaranteed placeholders of two
// CPUs and 100 MiB, pinned, bound by the placer, only on the cluster's slurmd nodes, one a node,
// kept apart from other jobs, most-loaded; while the placer cannot bind them, the job's comment
// says why; bound, running and pinned, the job starts on their nodes; when it ends, they go.
func TestHeldJobLifecycle(t *testing.T) {
	h := newHarness(t, heldJob(7, 2, 4, 50*slurm.MiB))

	h.sync(map[slurm.JobID][]Action{7: {Placed}})
	if got := h.podGroups(); !slices.Equal(got, []string{"vc1-slurm-7"}) {
		t.Fatalf("PodGroups %v, want vc1-slurm-7", got)
	}
	pg, _ := h.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace("hpc").Get(context.Background(), "vc1-slurm-7", metav1.GetOptions{})
	if mm, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); mm != 2 {
		t.Errorf("PodGroup minMember %d, want 2", mm)
	}
	pods := h.pods()
	if len(pods) != 2 || pods[0].Name != "vc1-slurm-7-0" || pods[1].Name != "vc1-slurm-7-1" {
		t.Fatalf("pods %v, want vc1-slurm-7-0 and -1", podNames(pods))
	}
	p := pods[0]
	wantLabels := map[string]string{LabelWorkload: WorkloadSlurmJob, LabelVirtualCluster: "vc1", LabelSlurmJob: "7",
		schedv1alpha1.LabelPodGroup: "vc1-slurm-7", v1alpha1.LabelPinning: v1alpha1.PinningExclusive}
	if d := cmp.Diff(wantLabels, p.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	wantAnn := map[string]string{v1alpha1.AnnotationExclusiveNodes: "true", v1alpha1.AnnotationPlacement: "most-loaded"}
	if d := cmp.Diff(wantAnn, p.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	c := p.Spec.Containers[0]
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("100Mi")}
	if !equalResources(c.Resources.Requests, want) || !equalResources(c.Resources.Limits, want) {
		t.Errorf("resources %v, want requests = limits = %v", c.Resources, want)
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var names []string
	for _, term := range terms {
		// The API server refuses a metadata.name requirement of several values.
		if len(term.MatchFields) != 1 || term.MatchFields[0].Key != "metadata.name" || term.MatchFields[0].Operator != corev1.NodeSelectorOpIn || len(term.MatchFields[0].Values) != 1 {
			t.Fatalf("node affinity term %+v, want metadata.name In one node", term)
		}
		names = append(names, term.MatchFields[0].Values[0])
	}
	if !slices.Equal(names, []string{"k1", "k2", "k3"}) {
		t.Errorf("node affinity to %v, want one term for each of k1, k2, k3", names)
	}
	if p.Spec.SchedulerName != v1alpha1.DefaultSchedulerName || c.Name != ContainerName || c.Image != DefaultOptions().Image ||
		len(c.Ports) != 1 || c.Ports[0].HostPort != DefaultOptions().HostPort || *p.Spec.TerminationGracePeriodSeconds != 0 ||
		!p.Spec.HostNetwork {
		t.Errorf("pod spec %+v", p.Spec)
	}
	if o := p.OwnerReferences; len(o) != 1 || o[0].UID != "vc-uid" || o[0].Kind != "VirtualCluster" || o[0].Name != "vc1" {
		t.Errorf("owners %+v, want the VirtualCluster vc1", o)
	}

	// Not bound: the job waits with the bridge's own words, then the placer's.
	h.sync(map[slurm.JobID][]Action{7: {Commented}})
	if got := h.slurm.jobs[7].Comment; got != "finegrain: waiting for the placer to bind 2 placeholder pods (2 CPUs each)" {
		t.Errorf("comment %q", got)
	}
	h.waits["vc1-slurm-7-0"] = "0/3 nodes have 2 free CPUs in one NUMA node"
	h.sync(map[slurm.JobID][]Action{7: {Commented}})
	if got := h.slurm.jobs[7].Comment; got != "finegrain: waiting for placement: 0/3 nodes have 2 free CPUs in one NUMA node" {
		t.Errorf("comment %q", got)
	}
	h.sync(nil)

	// Bound and running, not yet pinned; then pinned: started on their nodes.
	h.bind("vc1-slurm-7-0", "k3")
	h.bind("vc1-slurm-7-1", "k1")
	h.sync(map[slurm.JobID][]Action{7: {Commented}})
	if got := h.slurm.jobs[7].Comment; !strings.Contains(got, "waiting for the node agent to pin placeholder vc1-slurm-7-0 on node k3") {
		t.Errorf("comment %q", got)
	}
	h.pins["k3/vc1-slurm-7-0/placeholder"] = "2-3"
	h.pins["k1/vc1-slurm-7-1/placeholder"] = "4-5"
	h.sync(map[slurm.JobID][]Action{7: {Started}})
	if last := h.slurm.calls[len(h.slurm.calls)-2:]; last[0] != "start 7 on k1,k3" || last[1] != `comment 7 ""` {
		t.Errorf("last Slurm commands %q, want start 7 on k1,k3, then its waiting reason cleared", last)
	}

	// Released, pending a moment, then running: nothing to do.
	h.sync(nil)
	h.slurm.jobs[7].State = slurm.StateRunning
	h.sync(nil)

	// Ending (scancel): Slurm counts fewer nodes as they finish; the placeholders stay, nothing
	// is requeued, until the job has ended.
	h.slurm.jobs[7].State, h.slurm.jobs[7].Nodes = slurm.StateCompleting, 1
	h.sync(nil)
	if len(h.pods()) != 2 {
		t.Fatalf("while the job completes: pods %v, want both placeholders", podNames(h.pods()))
	}

	// Ended: the placeholders and their group go.
	h.slurm.jobs[7].State = slurm.StateCancelled
	h.sync(map[slurm.JobID][]Action{7: {Released}})
	if len(h.pods()) != 0 || len(h.podGroups()) != 0 {
		t.Fatalf("after the job ended: pods %v, PodGroups %v", podNames(h.pods()), h.podGroups())
	}
	h.sync(nil)
}

// On start the bridge reconciles both ways: a running job without its placeholders is requeued
// held (and placed again), as is one Slurm started without the bridge's node list; a pending job
// Slurm could start is held, placeholders of a job
// slurmctld does not know are deleted, a held job with a lost placeholder starts over, and pods
// that only look like placeholders, and jobs finegrain's job_submit.lua never saw, are left
// alone.
func TestReconcileBothWays(t *testing.T) {
	running := heldJob(1, 1, 2, 0)
	running.State, running.Priority, running.Reason = slurm.StateRunning, 1, "None"
	loose := heldJob(2, 1, 1, 0)
	loose.Priority, loose.Reason = 1, "Priority"
	// Jobs finegrain's job_submit.lua never saw (no admin comment of its): Slurm's own, left alone.
	own := heldJob(4, 1, 1, 0)
	own.State, own.Priority, own.Reason, own.AdminComment = slurm.StateRunning, 1, "None", ""
	ownHeld := heldJob(5, 1, 1, 0)
	ownHeld.AdminComment = "someone's note"
	// Released by hand while its placeholder waited (no node list of the bridge's): one still
	// pending, one Slurm started already.
	early := heldJob(6, 1, 1, 0)
	early.Priority, early.Reason = 1, "Resources"
	startedEarly := heldJob(7, 1, 1, 0)
	startedEarly.State, startedEarly.Priority, startedEarly.Reason, startedEarly.NodeList = slurm.StateRunning, 1, "None", "k2"
	h := newHarness(t, running, loose, heldJob(3, 2, 2, 0), own, ownHeld, early, startedEarly)

	// Placeholders of a job that is gone (9), and of job 3 with one pod lost.
	gone := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 9, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-9", Pods: 1, CPUs: 1, Memory: 1 << 20})
	three := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 3, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-3", Pods: 2, CPUs: 1, Memory: 1 << 20})
	// Look-alikes: another scheduler's pod, and one owned by another VirtualCluster.
	other := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 8, schedulerName: "default-scheduler", nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-8", Pods: 1, CPUs: 1, Memory: 1 << 20})
	foreign := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "not-vc1", job: 10, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-10", Pods: 1, CPUs: 1, Memory: 1 << 20})
	six := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 6, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-6", Pods: 1, CPUs: 1, Memory: 1 << 20})
	seven := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 7, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-7", Pods: 1, CPUs: 1, Memory: 1 << 20})
	for _, p := range []*corev1.Pod{gone[0], three[0], other[0], foreign[0], six[0], seven[0]} {
		if _, err := h.kube.CoreV1().Pods("hpc").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	h.sync(map[slurm.JobID][]Action{1: {Requeued}, 2: {Held}, 3: {Released}, 6: {Held}, 7: {Requeued}, 9: {Released}})
	if d := cmp.Diff([]string{"requeuehold 1", "hold 2", "hold 6", "requeuehold 7"}, h.slurm.calls); d != "" {
		t.Errorf("Slurm commands (-want +got):\n%s", d)
	}
	if got := podNames(h.pods()); !slices.Equal(got, []string{"vc1-slurm-10-0", "vc1-slurm-6-0", "vc1-slurm-8-0"}) {
		t.Errorf("pods left %v, want the look-alikes and job 6's placeholder", got)
	}
	// Now every job of finegrain's is held: those without placeholders are placed afresh, job 6
	// waits for the placer to bind its placeholder again.
	h.sync(map[slurm.JobID][]Action{1: {Placed}, 2: {Placed}, 3: {Placed}, 6: {Commented}, 7: {Placed}})
}

// A job's own placement options (its admin comment, as job_submit.lua wrote it from its
// comment) win over the bridge's; a malformed admin comment keeps the job waiting, saying why.
func TestJobOptions(t *testing.T) {
	spread := heldJob(1, 1, 1, 0)
	spread.AdminComment = "finegrain placement=least-loaded exclusive=false"
	bad := heldJob(2, 1, 1, 0)
	bad.AdminComment = "finegrain placement=packed"
	h := newHarness(t, spread, bad)
	h.sync(map[slurm.JobID][]Action{1: {Placed}, 2: {Commented}})
	p := h.pods()[0]
	if d := cmp.Diff(map[string]string{v1alpha1.AnnotationPlacement: "least-loaded"}, p.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	if got := h.slurm.jobs[2].Comment; !strings.Contains(got, `has "placement=packed"`) {
		t.Errorf("comment of the job with a bad admin comment %q", got)
	}
	// The bad one is told once; the placed one waits for the placer.
	h.sync(map[slurm.JobID][]Action{1: {Commented}})
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// Objects that only bear a placeholder's name are never taken for the bridge's: a held job whose
// PodGroup name is taken waits with an error naming the squatter; an ended job's placeholders go
// but a PodGroup of its name that the VirtualCluster does not own stays.
func TestLookAlikesLeftAlone(t *testing.T) {
	ended := heldJob(6, 1, 1, 0)
	ended.State = slurm.StateCompleted
	h := newHarness(t, heldJob(5, 1, 1, 0), ended)
	pgs := h.dyn.Resource(schedv1alpha1.GroupVersionResource).Namespace("hpc")
	for _, name := range []string{"vc1-slurm-5", "vc1-slurm-6"} {
		pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": "hpc"}, "spec": map[string]any{"minMember": int64(1)}}}
		if _, err := pgs.Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mine := (&placeholderSpec{namespace: "hpc", cluster: "vc1", owner: "vc-uid", job: 6, schedulerName: v1alpha1.DefaultSchedulerName, nodes: []string{"k1"}}).
		pods(Allocation{Group: "vc1-slurm-6", Pods: 1, CPUs: 1, Memory: 1 << 20})
	if _, err := h.kube.CoreV1().Pods("hpc").Create(context.Background(), mine[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	acts, err := h.b.Sync(context.Background(), h.cl)
	if err == nil || !strings.Contains(err.Error(), "PodGroup hpc/vc1-slurm-5 exists and is not virtual cluster vc1's") {
		t.Fatalf("Sync error %v, want one naming the squatting PodGroup", err)
	}
	if d := cmp.Diff(map[slurm.JobID][]Action{6: {Released}}, acts); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if got := podNames(h.pods()); len(got) != 0 {
		t.Errorf("pods %v, want none: job 5 gets none beside a foreign PodGroup, job 6's went", got)
	}
	if got := h.podGroups(); !slices.Equal(got, []string{"vc1-slurm-5", "vc1-slurm-6"}) {
		t.Errorf("PodGroups %v, want both look-alikes kept", got)
	}
}

// countingSlurm counts the passes that read a cluster's jobs.
type countingSlurm struct {
	*fakeSlurm
	reads atomic.Int32
}

func (c *countingSlurm) Jobs(ctx context.Context) ([]slurm.Job, error) {
	c.reads.Add(1)
	return c.fakeSlurm.Jobs(ctx)
}

// A virtual cluster without a job of finegrain's is read every IdleInterval, not every Interval;
// one with such a job every Interval.
func TestRunReadsQuietClustersLess(t *testing.T) {
	for _, tc := range []struct {
		name      string
		jobs      []slurm.Job
		wantReads func(n int32) bool
	}{
		{"quiet", []slurm.Job{{ID: 1, State: slurm.StateRunning, Priority: 1}}, func(n int32) bool { return n == 1 }},
		{"busy", []slurm.Job{heldJob(1, 1, 1, 0)}, func(n int32) bool { return n >= 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.jobs...)
			cs := &countingSlurm{fakeSlurm: h.slurm}
			h.cl.Slurm = cs
			h.b.opts.Interval, h.b.opts.IdleInterval = time.Millisecond, time.Hour
			ctx, cancel := context.WithCancel(context.Background())
			passes := 0
			h.b.Run(ctx, func(context.Context) ([]*Cluster, error) {
				if passes++; passes == 6 {
					cancel()
				}
				return []*Cluster{h.cl}, nil
			})
			if n := cs.reads.Load(); !tc.wantReads(n) {
				t.Errorf("%d reads of the jobs in 6 passes", n)
			}
		})
	}
}
