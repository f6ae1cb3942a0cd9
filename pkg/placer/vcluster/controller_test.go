package vcluster

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/clusterconf"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// A new virtual cluster gets its Secrets, its configuration with both nodes as they are, a
// slurmctld pod and a node pod per node, each labelled, on its node's network with the ports of
// the first free block; it is not Ready until slurmctld's pod is.
func TestVirtualClusterObjects(t *testing.T) {
	h := newHarness(t, vcObject("alice", map[string]any{}))
	h.reconcile("alice")
	vc := h.vc("alice")
	if p := vc.Status.Ports; p == nil || *p != blockAt(21000) {
		t.Fatalf("ports %+v, want the first block of 21000-21999", p)
	}
	if c := h.ready("alice"); c.Status != metav1.ConditionFalse || c.Reason != ReasonControllerNotReady {
		t.Errorf("Ready = %+v, want False %s", c, ReasonControllerNotReady)
	}
	ctx := context.Background()
	munge, err := h.kube.CoreV1().Secrets(ns).Get(ctx, "alice-munge", metav1.GetOptions{})
	if err != nil || len(munge.Data[layout.MungeKeySecretKey]) != mungeKeyBytes || !metav1.IsControlledBy(munge, vc) {
		t.Fatalf("munge Secret: %v %+v", err, munge)
	}
	ssh, err := h.kube.CoreV1().Secrets(ns).Get(ctx, "alice-ssh", metav1.GetOptions{})
	if err != nil || !strings.HasPrefix(string(ssh.Data[mpi.SecretPublicKey]), "ssh-ed25519 ") || !metav1.IsControlledBy(ssh, vc) {
		t.Fatalf("SSH Secret: %v", err)
	}
	cm, err := h.kube.CoreV1().ConfigMaps(ns).Get(ctx, "alice-slurm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conf := cm.Data[layout.SlurmConfKey]
	for _, want := range []string{
		"ClusterName=alice\n", "SlurmctldHost=localhost(10.0.0.1)\n", "SlurmctldPort=21000\n", "SlurmdPort=21001\n", "SrunPortRange=21003-21015\n",
		// node-a's layout from its NodeResourceTopology; node-b's agent publishes none.
		"NodeName=node-a NodeAddr=10.0.0.1 CPUs=16 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=16384 State=UNKNOWN\n",
		"NodeName=node-b NodeAddr=10.0.0.2 CPUs=4 RealMemory=16384 State=UNKNOWN\n",
		"PartitionName=batch Nodes=node-a,node-b Default=YES MaxTime=UNLIMITED State=UP\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	pods, _ := h.c.pods.Pods(ns).List(everything)
	roles := map[string]string{}
	for _, p := range pods {
		roles[p.Name] = p.Labels[v1alpha1.LabelRole] + "@" + p.Spec.NodeName
		if p.Labels[v1alpha1.LabelVirtualCluster] != "alice" || !p.Spec.HostNetwork || !metav1.IsControlledBy(p, vc) ||
			p.Annotations[AnnotationConfigHash] != vc.Status.ConfigHash || p.Spec.SchedulerName == v1alpha1.DefaultSchedulerName {
			t.Errorf("pod %s: labels %v hostNetwork %v owner %v", p.Name, p.Labels, p.Spec.HostNetwork, p.OwnerReferences)
		}
		if _, pinned := p.Labels[v1alpha1.LabelPinning]; pinned {
			t.Errorf("pod %s asks to be pinned: the virtual cluster's pods run in the shared pool", p.Name)
		}
	}
	want := map[string]string{"alice-slurmctld": "slurmctld@node-a", "alice-slurmd-node-a": "slurmd@node-a", "alice-slurmd-node-b": "slurmd@node-b"}
	if len(roles) != len(want) {
		t.Errorf("pods %v, want %v", roles, want)
	}
	for name, r := range want {
		if roles[name] != r {
			t.Errorf("pod %s: %q, want %q", name, roles[name], r)
		}
	}
	node, _ := h.c.pods.Pods(ns).Get("alice-slurmd-node-b")
	env := map[string]string{}
	for _, e := range node.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[layout.EnvRole] != "slurmd" || env[layout.EnvNodeName] != "node-b" || env[mpi.EnvSSHPort] != "21002" || env["SQUEUE_FORMAT2"] != slurm.SqueueFormat {
		t.Errorf("node pod env %v", env)
	}
	// The TaskProlog slurm.conf names is in the ConfigMap and mounted executable beside it.
	if !strings.Contains(conf, "TaskProlog="+layout.TaskProlog+"\n") || !strings.HasPrefix(cm.Data[layout.TaskPrologKey], "#!/bin/sh\n") {
		t.Errorf("no TaskProlog in slurm.conf or in the ConfigMap: %q", cm.Data[layout.TaskPrologKey])
	}
	var prologMode *int32
	for _, v := range node.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		for _, it := range v.ConfigMap.Items {
			if it.Key == layout.TaskPrologKey && it.Path == layout.TaskPrologKey {
				prologMode = it.Mode
			}
		}
	}
	if prologMode == nil || *prologMode != 0o555 {
		t.Errorf("the node pod mounts %s with mode %v, want 0555 (slurmstepd executes it as the job's user)", layout.TaskPrologKey, prologMode)
	}
	// A second reconcile changes nothing.
	before := h.kube.Actions()
	h.reconcile("alice")
	for _, a := range h.kube.Actions()[len(before):] {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("second reconcile wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// Two virtual clusters on the same nodes get blocks of their own; a port a pod holds on one of
// the nodes is skipped.
func TestVirtualClustersGetTheirOwnPorts(t *testing.T) {
	squatter := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "squatter", Namespace: "other"},
		Spec:       corev1.PodSpec{NodeName: "node-b", HostNetwork: true, Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 21020}}}}},
	}
	h := newHarness(t, vcObject("alice", map[string]any{}), vcObject("bob", map[string]any{}), squatter)
	h.reconcile("alice")
	h.reconcile("bob")
	if a, b := h.vc("alice").Status.Ports, h.vc("bob").Status.Ports; *a != blockAt(21000) || *b != blockAt(21032) {
		t.Errorf("alice %+v bob %+v, want blocks at 21000 and 21032 (21016-21031 holds the squatter's 21020)", a, b)
	}
	pods, _ := h.c.pods.Pods(ns).List(everything)
	if len(pods) != 6 {
		t.Errorf("%d pods, want 3 per virtual cluster", len(pods))
	}
}

// Ready once slurmctld answers and every node is up; the status shows Slurm's node states and
// jobs.
func TestVirtualClusterReady(t *testing.T) {
	h := newHarness(t, vcObject("alice", map[string]any{}))
	h.reconcile("alice")
	h.markReady()
	h.exec.sinfo = sinfoJSON(map[string]string{"node-a": "IDLE", "node-b": "DOWN+NOT_RESPONDING"})
	h.reconcile("alice")
	if c := h.ready("alice"); c.Status != metav1.ConditionFalse || c.Reason != ReasonNodesNotReady || !strings.Contains(c.Message, "node-b is DOWN+NOT_RESPONDING") {
		t.Errorf("Ready = %+v", c)
	}
	h.exec.sinfo = sinfoJSON(map[string]string{"node-a": "MIXED", "node-b": "IDLE"})
	h.exec.squeue = `{"errors":[],"jobs":[{"job_id":7,"name":"wrap","job_state":"RUNNING","partition":"batch","nodes":"node-a","state_reason":"None","priority":1,"node_count":1,"tasks":1,"cpus":1}]}`
	h.reconcile("alice")
	if c := h.ready("alice"); c.Status != metav1.ConditionTrue || c.Reason != ReasonReady {
		t.Errorf("Ready = %+v", c)
	}
	vc := h.vc("alice")
	if n := vc.Status.Nodes; len(n) != 2 || n[0].SlurmState != "MIXED" || !n[0].PodReady || n[1].Pod != "alice-slurmd-node-b" || n[1].SlurmState != "IDLE" {
		t.Errorf("nodes %+v", n)
	}
	if j := vc.Status.Jobs; len(j) != 1 || j[0] != (v1alpha1.SlurmJob{ID: 7, Name: "wrap", State: "RUNNING", Partition: "batch", Nodes: "node-a"}) {
		t.Errorf("jobs %+v", j)
	}
	if got := h.exec.pods[len(h.exec.pods)-1]; got != "alice-slurmctld/slurmctld" {
		t.Errorf("ran Slurm's commands in %s, want the slurmctld container", got)
	}
	h.exec.err = errors.New("connection refused")
	h.reconcile("alice")
	if c := h.ready("alice"); c.Reason != ReasonSlurmctldUnreachable || !strings.Contains(c.Message, "connection refused") {
		t.Errorf("Ready = %+v", c)
	}
}

// Look-alike objects the virtual cluster does not own are reported and left alone.
func TestVirtualClusterNeverAdopts(t *testing.T) {
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alice-slurm", Namespace: ns}, Data: map[string]string{"x": "y"}}
	h := newHarness(t, vcObject("alice", map[string]any{}), foreign)
	h.reconcile("alice")
	if c := h.ready("alice"); c.Reason != ReasonNotOwned || !strings.Contains(c.Message, "ConfigMap hpc/alice-slurm already exists and is not managed by VirtualCluster alice") {
		t.Errorf("Ready = %+v", c)
	}
	cm, _ := h.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "alice-slurm", metav1.GetOptions{})
	if len(cm.Data) != 1 || cm.Data["x"] != "y" {
		t.Errorf("the foreign ConfigMap was changed: %v", cm.Data)
	}
	if pods, _ := h.c.pods.Pods(ns).List(everything); len(pods) != 0 {
		t.Errorf("%d pods made without the configuration", len(pods))
	}
}

// A change of nodes rewrites the configuration and replaces the pods made with the old one; a
// node the selector no longer matches loses its pod.
func TestVirtualClusterFollowsItsNodes(t *testing.T) {
	h := newHarness(t, vcObject("alice", map[string]any{}))
	h.reconcile("alice")
	old := h.vc("alice").Status.ConfigHash
	n, _ := h.kube.CoreV1().Nodes().Get(context.Background(), "node-b", metav1.GetOptions{})
	n.Spec.Unschedulable = true
	if _, err := h.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { n, _ := h.c.nodes.Get("node-b"); return n.Spec.Unschedulable })
	h.reconcile("alice")
	vc := h.vc("alice")
	if vc.Status.ConfigHash == old {
		t.Error("the configuration did not change with the nodes")
	}
	cm, _ := h.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "alice-slurm", metav1.GetOptions{})
	if strings.Contains(cm.Data[layout.SlurmConfKey], "node-b") {
		t.Errorf("slurm.conf still names node-b:\n%s", cm.Data[layout.SlurmConfKey])
	}
	// The pods made with the old configuration are deleted; new ones come as soon as the old are
	// gone (at once with the fake client, a reconcile later on a real one).
	h.reconcile("alice")
	pods, _ := h.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 2 {
		t.Errorf("%d pods, want slurmctld and node-a's", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Annotations[AnnotationConfigHash] != vc.Status.ConfigHash {
			t.Errorf("pod %s made with configuration %s, want %s", p.Name, p.Annotations[AnnotationConfigHash], vc.Status.ConfigHash)
		}
	}
}

func TestVirtualClusterInvalidOrWithoutNodes(t *testing.T) {
	h := newHarness(t,
		vcObject("bad", map[string]any{"partitions": []any{map[string]any{"name": "a b"}}}),
		vcObject("lonely", map[string]any{"nodeSelector": map[string]any{"pool": "gpu"}}))
	h.reconcile("bad")
	if c := h.ready("bad"); c.Reason != ReasonInvalidSpec || !strings.Contains(c.Message, "spec.partitions[0].name") {
		t.Errorf("Ready = %+v", c)
	}
	h.reconcile("lonely")
	if c := h.ready("lonely"); c.Reason != ReasonNoNodes || !strings.Contains(c.Message, "map[pool:gpu]") {
		t.Errorf("Ready = %+v", c)
	}
	if pods, _ := h.c.pods.Pods(ns).List(everything); len(pods) != 0 {
		t.Errorf("%d pods made", len(pods))
	}
}

// A deleted virtual cluster is gone for good: the loop forgets it instead of looking again every
// period (its objects go with it through their owner references).
func TestDeletedVirtualClusterIsForgotten(t *testing.T) {
	deleting := vcObject("leaving", map[string]any{})
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	deleting.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
	h := newHarness(t, deleting)
	if err := h.c.reconcile(context.Background(), ns+"/nobody"); !errors.Is(err, errGone) {
		t.Errorf("reconcile of a missing virtual cluster: %v, want errGone", err)
	}
	// Under foreground deletion the garbage collector deletes the pods first: none is made again.
	if err := h.c.reconcile(context.Background(), ns+"/leaving"); !errors.Is(err, errGone) {
		t.Errorf("reconcile of a virtual cluster being deleted: %v, want errGone", err)
	}
	if pods, _ := h.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d pods made for a virtual cluster being deleted", len(pods.Items))
	}
}

// A shared volume is checked before anything is made (the claim exists, ReadWriteMany), then
// mounted by every pod at its path, which is also their working directory; it is part of what
// replaces the pods when it changes.
func TestVirtualClusterSharedVolume(t *testing.T) {
	spec := map[string]any{"sharedVolume": map[string]any{"claimName": "home"}}
	h := newHarness(t, vcObject("alice", spec))
	ctx := context.Background()
	h.reconcile("alice")
	if c := h.ready("alice"); c.Reason != ReasonSharedVolume || c.Message != "spec.sharedVolume: PersistentVolumeClaim hpc/home does not exist: create it with access mode ReadWriteMany, or remove spec.sharedVolume" {
		t.Errorf("without the claim: Ready = %+v", c)
	}
	if pods, _ := h.c.pods.Pods(ns).List(everything); len(pods) != 0 {
		t.Errorf("%d pods made without their shared volume", len(pods))
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	if _, err := h.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.reconcile("alice")
	if c := h.ready("alice"); c.Reason != ReasonSharedVolume || !strings.Contains(c.Message, "PersistentVolumeClaim hpc/home has access modes [ReadWriteOnce]: the pods on every spanned node mount it at once, which takes ReadWriteMany") {
		t.Errorf("with a ReadWriteOnce claim: Ready = %+v", c)
	}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if _, err := h.kube.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.reconcile("alice")
	if c := h.ready("alice"); c.Reason != ReasonControllerNotReady {
		t.Errorf("with a ReadWriteMany claim: Ready = %+v, want %s", c, ReasonControllerNotReady)
	}
	pods, _ := h.c.pods.Pods(ns).List(everything)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want slurmctld and two node pods", len(pods))
	}
	for _, p := range pods {
		ctr := p.Spec.Containers[0]
		var mounted, claimed bool
		for _, m := range ctr.VolumeMounts {
			mounted = mounted || (m.Name == sharedVolumeName && m.MountPath == v1alpha1.DefaultSharedMountPath && !m.ReadOnly)
		}
		for _, v := range p.Spec.Volumes {
			claimed = claimed || (v.Name == sharedVolumeName && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "home")
		}
		if !mounted || !claimed || ctr.WorkingDir != v1alpha1.DefaultSharedMountPath {
			t.Errorf("pod %s: mounts %+v, volumes %+v, working directory %q; want claim home read-write at /home, the working directory", p.Name, ctr.VolumeMounts, p.Spec.Volumes, ctr.WorkingDir)
		}
	}
	files := clusterconf.Files{layout.SlurmConfKey: "x"}
	home, scratch := &v1alpha1.SharedVolume{ClaimName: "home", MountPath: "/home"}, &v1alpha1.SharedVolume{ClaimName: "home", MountPath: "/scratch"}
	if configHash(files, nil) == configHash(files, home) || configHash(files, home) == configHash(files, scratch) {
		t.Error("the pods' hash does not change with the shared volume")
	}
}

// Every path the pods mount something at is refused as a shared volume's mount path: the
// validation's lists of system directories and of the pods' own mounts cover them.
func TestSharedVolumeCannotCoverThePodsMounts(t *testing.T) {
	vc := &v1alpha1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: ns}}
	v1alpha1.SetVirtualClusterDefaults(&vc.Spec)
	for _, p := range desiredPods(vc, "hash", blockAt(21000), []*corev1.Node{testNode("node-a", "10.0.0.1", 4)}, "node-a") {
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			for _, at := range []string{m.MountPath, path.Dir(m.MountPath), m.MountPath + "/sub"} {
				if at == "/" {
					continue
				}
				bad := *vc
				bad.Spec.SharedVolume = &v1alpha1.SharedVolume{ClaimName: "home", MountPath: at}
				if errs := v1alpha1.ValidateVirtualCluster(&bad); len(errs) == 0 {
					t.Errorf("pod %s mounts %s at %s, yet a shared volume may be mounted at %s", p.Name, m.Name, m.MountPath, at)
				}
			}
		}
	}
}
