package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/priority"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// Tests of issue 21: what one tenant (a namespace user) must not do to another through the placer.

// inNamespace moves a job to another namespace.
func inNamespace(ns string, u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetNamespace(ns)
	return u
}

// shrinkScene runs team-b's elastic job (with a rescale hook) at its maximum of 4 workers on two
// nodes that then have no room left for team-a's 8-task network job.
func shrinkScene(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	h := newHarness(t, opts, append(append(cluster(2, 9), objs...), inNamespace("team-b", hpcJob("el", 32, hooked(1, 4))))...)
	h.eventually("team-b's elastic job at 4 workers", func() bool {
		return h.phase("team-b", "el") == v1alpha1.PhaseRunning && h.job("team-b", "el").Status.Workers == 4
	})
	h.runLauncher("team-b", "el")
	return h
}

func network(mutate func(*v1alpha1.HPCJobSpec)) func(*v1alpha1.HPCJobSpec) {
	return func(s *v1alpha1.HPCJobSpec) {
		s.Profile = v1alpha1.ProfileNetwork
		mutate(s)
	}
}

// Finding 1: an HPCJob in team-a with priority 2147483647 shrank team-b's elastic job. Without a
// PriorityClass that lets it, a self-assigned priority counts as 0 and shrinks nothing.
func TestSelfAssignedPriorityShrinksNothing(t *testing.T) {
	h := shrinkScene(t, testOptions())
	h.createJob(inNamespace("team-a", hpcJob("greedy", 8, network(func(s *v1alpha1.HPCJobSpec) { s.Priority = ptr.To[int32](math.MaxInt32) }))))
	h.eventually("greedy waits", func() bool { return h.rec.find("Warning Unschedulable greedy") })
	h.never("team-b's job was shrunk", 300*time.Millisecond, func() bool { return h.job("team-b", "el").Status.Workers != 4 })
}

// A PriorityClass lifts a job, but under --shrink-scope=namespace only over its own namespace.
func TestShrinkScopeNamespace(t *testing.T) {
	opts := testOptions()
	opts.ShrinkScope = priority.ScopeNamespace
	h := shrinkScene(t, opts, priorityClass("urgent", 1000, false))
	h.createJob(inNamespace("team-a", hpcJob("urgent", 8, network(withClass("urgent")))))
	h.eventually("urgent waits", func() bool { return h.rec.find("Warning Unschedulable urgent") })
	h.never("team-b's job was shrunk across namespaces", 300*time.Millisecond, func() bool { return h.job("team-b", "el").Status.Workers != 4 })
	h.createJob(inNamespace("team-b", hpcJob("own", 8, network(withClass("urgent")))))
	h.eventually("team-b's own urgent job shrinks it", func() bool { return h.phase("team-b", "own") == v1alpha1.PhaseRunning })
}

// A class the namespace may not use (the API server refuses its pods: here a PriorityClass quota)
// shrinks nothing, and the job says why.
func TestShrinkNeedsAdmittedPods(t *testing.T) {
	h := shrinkScene(t, testOptions(), priorityClass("urgent", 1000, false))
	h.mu.Lock()
	h.admit = func(p *corev1.Pod) error {
		if p.Namespace == "team-a" && p.Spec.PriorityClassName == "urgent" {
			return apierrors.NewForbidden(podsGVR.GroupResource(), p.Name, errFakeQuota)
		}
		return nil
	}
	h.mu.Unlock()
	h.createJob(inNamespace("team-a", hpcJob("urgent", 8, network(withClass("urgent")))))
	h.eventually("urgent told why nothing shrinks", func() bool { return h.rec.find("Warning " + ReasonNotAdmitted + " urgent") })
	if h.job("team-b", "el").Status.Workers != 4 {
		t.Error("team-b's job was shrunk for a job whose pods the API server refuses")
	}
	if !strings.Contains(h.rec.all(), errFakeQuota.Error()) {
		t.Errorf("events do not quote the API server's refusal:\n%s", h.rec.all())
	}
}

// A job naming a class that does not exist waits, saying so, and is placed once it exists.
func TestMissingPriorityClass(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(1, 9), hpcJob("gold", 2, withClass("gold")))...)
	h.eventually("gold waits for its class", func() bool {
		c := h.condition("hpc", "gold", ConditionScheduled)
		return c != nil && c.Reason == ReasonPriorityClassNotFound && strings.Contains(c.Message, `PriorityClass "gold" does not exist`)
	})
	h.create(priorityClass("gold", 5, false))
	h.eventually("gold placed", func() bool { return h.phase("hpc", "gold") == v1alpha1.PhaseRunning })
	if p := h.pod("hpc", "gold-worker-0"); p.Spec.PriorityClassName != "gold" {
		t.Errorf("worker's priorityClassName %q, want the job's", p.Spec.PriorityClassName)
	}
}

var errFakeQuota = errors.New(`insufficient quota to match these scopes: [{PriorityClass In [urgent]}]`)

// statefulSetPod is a pod of another controller (a StatefulSet "db") that a user labelled as if it
// were a worker of HPCJob "db".
func statefulSetPod(name, node string) *corev1.Pod {
	p := st.Pod("hpc", name, node, "100m", "", false)
	yes := true
	p.UID = k8stypes.UID("uid-sts-" + name)
	p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = "db", v1alpha1.RoleWorker
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "uid-sts", Controller: &yes}}
	return p
}

// Finding 4: the placer took every pod labelled finegrain.dev/job: db for a worker of HPCJob db
// and deleted it with grace 0 (an interrupted attempt, a restart, clean-up). It now leaves a pod
// the job does not control alone: the job is placed and ends around it.
func TestForeignLabelledPodIsLeftAlone(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), statefulSetPod("db-0", "n-0000"), hpcJob("db", 4, nil))...)
	h.eventually("db running", func() bool { return h.phase("hpc", "db") == v1alpha1.PhaseRunning })
	h.setPhase("hpc", "db-launcher", corev1.PodSucceeded)
	h.eventually("db finished", func() bool { return h.phase("hpc", "db") == v1alpha1.PhaseSucceeded })
	h.eventually("db's workers cleaned up", func() bool { _, ok := h.lookup("hpc", "db-worker-0"); return !ok })
	if p, ok := h.lookup("hpc", "db-0"); !ok || p.DeletionTimestamp != nil {
		t.Fatal("the StatefulSet's pod was deleted as a worker of HPCJob db")
	}
	for _, a := range h.kube.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && d.GetName() == "db-0" {
			t.Fatalf("the placer asked to delete the StatefulSet's pod: %v", d)
		}
	}
}

// A pod the job does not own holding one of its pod names (here its first worker's) stops the job
// with a condition naming that pod, which is neither deleted nor adopted; once it is gone, the job
// is placed.
func TestForeignPodHoldingAWorkerName(t *testing.T) {
	h := newHarness(t, testOptions(), append(cluster(2, 9), statefulSetPod("db-worker-0", "n-0001"), hpcJob("db", 4, nil))...)
	h.eventually("db says which pod is in its way", func() bool {
		c := h.condition("hpc", "db", ConditionScheduled)
		return c != nil && c.Reason == ReasonNotOwned && strings.Contains(c.Message, "Pod hpc/db-worker-0 exists and is not owned by HPCJob hpc/db")
	})
	if p, ok := h.lookup("hpc", "db-worker-0"); !ok || p.UID != "uid-sts-db-worker-0" {
		t.Fatal("the foreign pod was replaced")
	}
	if err := h.kube.CoreV1().Pods("hpc").Delete(context.Background(), "db-worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("db running", func() bool { return h.phase("hpc", "db") == v1alpha1.PhaseRunning })
}

// deletePods is the one place the placer deletes pods; it refuses any pod the job does not
// control, or whose UID it does not know, whoever asks.
func TestDeletePodsRefusesForeignPods(t *testing.T) {
	foreign := statefulSetPod("db-0", "n-0000")
	own := ownedBy(st.Pod("hpc", "db-worker-0", "n-0000", "1", "", true), "db")
	noUID := ownedBy(st.Pod("hpc", "db-worker-1", "n-0000", "1", "", true), "db")
	h := newHarness(t, testOptions(), foreign, own, noUID)
	job := &v1alpha1.HPCJob{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: "db", UID: "uid-db"}}
	unknown := noUID.DeepCopy()
	unknown.UID = ""
	h.c.deletePods(context.Background(), job, []*corev1.Pod{foreign, own, unknown}, nil)
	h.eventually("the job's own pod deleted", func() bool { _, ok := h.lookup("hpc", "db-worker-0"); return !ok })
	h.never("a pod not the job's was deleted", 200*time.Millisecond, func() bool {
		_, a := h.lookup("hpc", "db-0")
		_, b := h.lookup("hpc", "db-worker-1")
		return !a || !b
	})
}

// Finding 2: four 10m pods carrying finegrain.dev/exclusive-nodes and an HPC job's labels,
// scheduled by the default scheduler, fenced a 16-task job off every node. The placer now counts
// only the pods it vouches for (snapshot.JobRecord), so jobs with and without exclusive nodes of
// their own fit around them.
func TestForeignPodsFenceNothing(t *testing.T) {
	for _, exclusive := range []bool{false, true} {
		t.Run(fmt.Sprintf("exclusive=%v", exclusive), func(t *testing.T) {
			objs := cluster(4, 9)
			for i := range 4 {
				p := st.Pod("team-a", fmt.Sprintf("fence-%d", i), fmt.Sprintf("n-%04d", i), "10m", "", false)
				p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = "fence", v1alpha1.RoleWorker
				p.Labels[v1alpha1.LabelPodGroup] = "fence"
				p.Annotations[v1alpha1.AnnotationExclusiveNodes] = "true"
				p.Spec.SchedulerName = "default-scheduler"
				objs = append(objs, p)
			}
			h := newHarness(t, testOptions(), append(objs, hpcJob("wide", 16, func(s *v1alpha1.HPCJobSpec) { s.ExclusiveNodes = exclusive }))...)
			h.eventually("placed or refused", func() bool {
				return h.phase("hpc", "wide") == v1alpha1.PhaseRunning || h.rec.find("Warning Unschedulable wide")
			})
			if h.phase("hpc", "wide") != v1alpha1.PhaseRunning {
				t.Fatalf("a 16-task job was fenced off by pods the placer never placed:\n%s", h.rec.all())
			}
		})
	}
}

// The placer's own workers keep their job's fence once the informer shows them (no longer
// assumed): the job's status placements vouch for them.
func TestOwnExclusiveJobKeepsItsNodes(t *testing.T) {
	one := func(exclusive bool) func(*v1alpha1.HPCJobSpec) {
		return func(s *v1alpha1.HPCJobSpec) {
			s.Granularity, s.Workers, s.ExclusiveNodes, s.Placement = v1alpha1.GranularityNone, 1, exclusive, v1alpha1.MostLoaded
		}
	}
	h := newHarness(t, testOptions(), append(cluster(2, 9), hpcJob("first", 4, one(true)))...)
	h.eventually("first running", func() bool { return h.phase("hpc", "first") == v1alpha1.PhaseRunning })
	h.eventually("nothing assumed", func() bool { return h.metric(h.c.metrics.Assumed) == 0 })
	h.createJob(hpcJob("second", 4, one(false)))
	h.eventually("second running", func() bool { return h.phase("hpc", "second") == v1alpha1.PhaseRunning })
	if a, b := h.job("hpc", "first").Status.Placements[0].Node, h.job("hpc", "second").Status.Placements[0].Node; a == b {
		t.Errorf("second placed on %s, the node of the exclusive job first (most-loaded prefers it unless fenced)", b)
	}
}

// A status the placer writes for a job object lands on that object only: a job deleted and made
// again under its name never gets its predecessor's placements (it would be Running on workers it
// never had, and end WorkerFailed). The patch tests the object's UID and sets the whole status.
func TestStatusPatchNamesTheJobObject(t *testing.T) {
	again := hpcJob("j", 1, nil)
	again.SetUID("uid-j-2")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "HPCJobList"}, again)
	jobs := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("hpc")
	running := &v1alpha1.HPCJobStatus{Phase: v1alpha1.PhaseRunning, Placements: []v1alpha1.WorkerPlacement{{Worker: "j-worker-0", Node: "n-0000"}}}
	write := func(uid k8stypes.UID, st *v1alpha1.HPCJobStatus) error {
		patch, err := statusPatch(uid, st)
		if err != nil {
			t.Fatal(err)
		}
		_, err = jobs.Patch(context.Background(), "j", k8stypes.JSONPatchType, patch, metav1.PatchOptions{}, "status")
		return err
	}
	if err := write("uid-j", running); err == nil {
		t.Error("the old job's status was written on the job made again under its name")
	}
	if err := write("uid-j-2", running); err != nil {
		t.Fatalf("the job's own status: %v", err)
	}
	if err := write("uid-j-2", &v1alpha1.HPCJobStatus{Phase: v1alpha1.PhasePending}); err != nil {
		t.Fatal(err)
	}
	u, err := jobs.Get(context.Background(), "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has, _ := unstructured.NestedSlice(u.Object, "status", "placements"); has {
		t.Errorf("status %v: a status without placements left the earlier ones", u.Object["status"])
	}
}

// Finding 4, the job's Service: a Service of the name a job's workers need ("db-workers"), made
// by someone else, is neither adopted nor changed. The job waits, naming it; once it is gone, the
// job makes its own.
func TestForeignServiceIsNotAdopted(t *testing.T) {
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: v1alpha1.ServiceName("db"), Labels: map[string]string{"app": "db"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432}}},
	}
	h := newHarness(t, testOptions(), append(cluster(2, 9), foreign, hpcJob("db", 4, nil))...)
	h.eventually("db says which Service is in its way", func() bool {
		c := h.condition("hpc", "db", ConditionScheduled)
		return c != nil && c.Reason == ReasonNotOwned && strings.Contains(c.Message, "Service hpc/db-workers exists and is not owned by HPCJob hpc/db")
	})
	svcs := h.kube.CoreV1().Services("hpc")
	if svc, err := svcs.Get(context.Background(), "db-workers", metav1.GetOptions{}); err != nil || len(svc.OwnerReferences) != 0 ||
		svc.Spec.Selector["app"] != "db" || len(svc.Spec.Selector) != 1 {
		t.Fatalf("the foreign Service was changed or adopted: %+v (%v)", svc, err)
	}
	if len(h.pods("hpc")) != 0 {
		t.Errorf("pods were created for a job whose Service is foreign: %d", len(h.pods("hpc")))
	}
	if err := svcs.Delete(context.Background(), "db-workers", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("db running", func() bool { return h.phase("hpc", "db") == v1alpha1.PhaseRunning })
	svc, err := svcs.Get(context.Background(), "db-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(svc); ref == nil || ref.UID != "uid-db" {
		t.Errorf("the job's own Service has controller %+v, want HPCJob db", ref)
	}
}
