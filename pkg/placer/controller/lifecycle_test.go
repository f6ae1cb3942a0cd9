package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

// lookup returns a pod, or false when it does not exist.
func (h *harness) lookup(ns, name string) (*corev1.Pod, bool) {
	p, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return p, true
}

// updateStatus edits a pod's status as the kubelet would.
func (h *harness) updateStatus(ns, name string, edit func(*corev1.PodStatus)) {
	h.t.Helper()
	p, ok := h.lookup(ns, name)
	if !ok {
		h.t.Fatalf("pod %s/%s does not exist", ns, name)
	}
	edit(&p.Status)
	if _, err := h.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// setReady marks a pod Running and Ready.
func (h *harness) setReady(ns, name string) {
	h.updateStatus(ns, name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
}

func (h *harness) condition(ns, name, typ string) *metav1.Condition {
	return meta.FindStatusCondition(h.job(ns, name).Status.Conditions, typ)
}

// finishedWith waits until the job ended in phase with the Finished reason, and returns the
// condition's message.
func (h *harness) finishedWith(ns, name string, phase v1alpha1.Phase, reason string) string {
	h.t.Helper()
	h.eventually("job "+string(phase)+" with "+reason, func() bool {
		c := h.condition(ns, name, ConditionFinished)
		return h.phase(ns, name) == phase && c != nil && c.Reason == reason
	})
	return h.condition(ns, name, ConditionFinished).Message
}

func defaultLaunch(s *v1alpha1.HPCJobSpec) { s.LauncherCreationPolicy = v1alpha1.WaitForWorkersReady }

// The default policy: the launcher is created only once every worker is Ready, next to them.
func TestLauncherWaitsForReadyWorkers(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 8)...)
	h.createJob(hpcJob("j", 4, defaultLaunch))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.eventually("WorkersReady False", func() bool {
		c := h.condition("hpc", "j", ConditionWorkersReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "is not ready")
	})
	h.never("launcher created before its workers are ready", 200*time.Millisecond, func() bool {
		_, ok := h.lookup("hpc", "j-launcher")
		return ok
	})
	if h.job("hpc", "j").Status.LauncherCreationTime != nil {
		t.Error("launcherCreationTime set before the launcher exists")
	}
	job := h.job("hpc", "j")
	h.setReady("hpc", job.Status.Placements[0].Worker)
	h.never("launcher created with one of two workers ready", 200*time.Millisecond, func() bool {
		_, ok := h.lookup("hpc", "j-launcher")
		return ok
	})
	h.setReady("hpc", job.Status.Placements[1].Worker)
	h.eventually("launcher created", func() bool {
		_, ok := h.lookup("hpc", "j-launcher")
		return ok && h.job("hpc", "j").Status.LauncherCreationTime != nil
	})
	l, _ := h.lookup("hpc", "j-launcher")
	onWorkerNode := false
	for _, pl := range job.Status.Placements {
		onWorkerNode = onWorkerNode || pl.Node == l.Spec.NodeName
	}
	if !onWorkerNode || !h.rec.find("Normal LauncherCreated j: created launcher j-launcher on node "+l.Spec.NodeName) {
		t.Errorf("launcher on %q, workers %+v; events:\n%s", l.Spec.NodeName, job.Status.Placements, h.rec.all())
	}
	if c := h.condition("hpc", "j", ConditionWorkersReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("WorkersReady %+v", c)
	}
	h.setPhase("hpc", "j-launcher", corev1.PodSucceeded)
	h.finishedWith("hpc", "j", v1alpha1.PhaseSucceeded, ReasonCompleted)
}

// Every job gets its own SSH identity once, owned by the job; what the placer did not make is
// never adopted nor overwritten.
func TestSSHSecretAndForeignObjects(t *testing.T) {
	foreignSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "j-ssh", Namespace: "hpc"}, Data: map[string][]byte{"k": []byte("v")}}
	foreignCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k-hostfile", Namespace: "hpc"}, Data: map[string]string{"app": "db"}}
	objs := append(cluster(2, 8), foreignSecret, foreignCM)
	h := newHarness(t, testOptions(), objs...)
	h.createJob(hpcJob("j", 2, nil))
	h.createJob(hpcJob("k", 2, nil))
	h.eventually("both jobs refused", func() bool {
		cj, ck := h.condition("hpc", "j", ConditionScheduled), h.condition("hpc", "k", ConditionScheduled)
		return cj != nil && cj.Reason == ReasonNotOwned && strings.Contains(cj.Message, "Secret hpc/j-ssh exists and is not owned by HPCJob hpc/j") &&
			ck != nil && ck.Reason == ReasonNotOwned && strings.Contains(ck.Message, "ConfigMap hpc/k-hostfile exists and is not owned by HPCJob hpc/k")
	})
	if cm, _ := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), "k-hostfile", metav1.GetOptions{}); cm.Data["app"] != "db" || len(cm.Data) != 1 {
		t.Errorf("the foreign ConfigMap was changed: %v", cm.Data)
	}
	if len(h.pods("hpc")) != 0 {
		t.Errorf("pods were created for jobs whose objects are foreign: %d", len(h.pods("hpc")))
	}
	// Once the foreign Secret is gone, j gets its own.
	if err := h.kube.CoreV1().Secrets("hpc").Delete(context.Background(), "j-ssh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("job j running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	sec, err := h.kube.CoreV1().Secrets("hpc").Get(context.Background(), "j-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sec); sec.Type != corev1.SecretTypeSSHAuth || ref == nil || ref.UID != "uid-j" {
		t.Errorf("Secret type %q controller %+v", sec.Type, ref)
	}
	signer, err := ssh.ParsePrivateKey(sec.Data[mpi.SecretPrivateKey])
	if err != nil {
		t.Fatalf("the Secret's private key: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(sec.Data[mpi.SecretPublicKey])
	if err != nil || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Errorf("the Secret's public key does not match its private key (%v)", err)
	}
	if strings.Contains(h.rec.all(), "PRIVATE KEY") {
		t.Error("an event carries the private key")
	}
}

// Workers on their node's network get sshd ports free on their node, written into the SSH
// configuration the launcher mounts.
func TestHostNetworkWorkersGetFreePorts(t *testing.T) {
	objs := cluster(1, 8)
	holder := st.Pod("other", "sshd", "n-0000", "100m", "", false)
	holder.Spec.HostNetwork = true
	holder.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 20000}}
	objs = append(objs, holder)
	h := newHarness(t, testOptions(), objs...)
	h.createJob(hpcJob("j", 2, func(s *v1alpha1.HPCJobSpec) {
		s.Granularity = v1alpha1.GranularityFine
		s.Worker.Spec.HostNetwork = true
	}))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	ports := map[int32]string{}
	for _, p := range h.pods("hpc") {
		if p.Labels[v1alpha1.LabelRole] != v1alpha1.RoleWorker {
			continue
		}
		c := p.Spec.Containers[0]
		if len(c.Ports) != 1 || c.Ports[0].HostPort != c.Ports[0].ContainerPort || c.StartupProbe.TCPSocket.Port.IntVal != c.Ports[0].ContainerPort {
			t.Errorf("worker %s ports %+v probe %+v", p.Name, c.Ports, c.StartupProbe)
		}
		ports[c.Ports[0].HostPort] = p.Name
	}
	if len(ports) != 2 || ports[20001] == "" || ports[20002] == "" {
		t.Errorf("worker ports %v, want 20001 and 20002 (20000 is held on the node)", ports)
	}
	cm, err := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), "j-hostfile", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for port, name := range ports {
		want := "Host " + name + ".j-workers.hpc.svc " + name + ".j-workers\n    Port " + itoa(int(port)) + "\n"
		if !strings.Contains(cm.Data[mpi.SSHConfigKey], want) {
			t.Errorf("ssh_config lacks %q:\n%s", want, cm.Data[mpi.SSHConfigKey])
		}
	}
}

// A failed launcher is created again while runPolicy.backoffLimit allows, then the job fails.
func TestLauncherRetriedWithinBackoffLimit(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	one := int32(1)
	h.createJob(hpcJob("j", 1, func(s *v1alpha1.HPCJobSpec) { s.RunPolicy.BackoffLimit = &one }))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.updateStatus("hpc", "j-launcher", func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "mpirun", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "rank 0 aborted\nMPI_ABORT was invoked"}}}}
	})
	// A new pod is one without the old one's status.
	h.eventually("a new launcher", func() bool {
		p, ok := h.lookup("hpc", "j-launcher")
		return ok && p.Status.Phase == "" && h.job("hpc", "j").Status.Restarts == 1
	})
	if !h.rec.find("Warning Restarting j: the launcher failed: container mpirun exited 1 (Error): rank 0 aborted | MPI_ABORT was invoked; retry 1 of 1") {
		t.Errorf("events:\n%s", h.rec.all())
	}
	if h.phase("hpc", "j") != v1alpha1.PhaseRunning {
		t.Errorf("phase %s during the retry", h.phase("hpc", "j"))
	}
	h.setPhase("hpc", "j-launcher", corev1.PodFailed)
	msg := h.finishedWith("hpc", "j", v1alpha1.PhaseFailed, ReasonLauncherFail)
	if !strings.Contains(msg, "runPolicy.backoffLimit 1 reached") {
		t.Errorf("Finished message %q", msg)
	}
	h.eventually("workers deleted, the failed launcher kept for its logs", func() bool {
		ps := h.pods("hpc")
		return len(ps) == 1 && ps[0].Name == "j-launcher"
	})
}

// A worker that vanishes fails the job, naming it, and nothing of the job keeps running.
func TestLostWorkerFailsTheJob(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 8)...)
	h.createJob(hpcJob("j", 4, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.setReady("hpc", "j-launcher")
	victim := h.job("hpc", "j").Status.Placements[1]
	if err := h.kube.CoreV1().Pods("hpc").Delete(context.Background(), victim.Worker, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := h.finishedWith("hpc", "j", v1alpha1.PhaseFailed, ReasonWorkerFailed)
	if want := "worker " + victim.Worker + " on node " + victim.Node + " was deleted while the job ran"; msg != want {
		t.Errorf("Finished message %q, want %q", msg, want)
	}
	h.eventually("every pod deleted (the launcher still ran)", func() bool { return len(h.pods("hpc")) == 0 })
}

// Within the backoff limit a lost worker restarts the whole job on fresh pods.
func TestLostWorkerRestartsTheJob(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(2, 8)...)
	one := int32(1)
	h.createJob(hpcJob("j", 2, func(s *v1alpha1.HPCJobSpec) { s.RunPolicy.BackoffLimit = &one }))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	w := h.job("hpc", "j").Status.Placements[0].Worker
	h.updateStatus("hpc", w, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	h.eventually("the job running again on new pods", func() bool {
		j := h.job("hpc", "j")
		p, ok := h.lookup("hpc", w)
		return j.Status.Phase == v1alpha1.PhaseRunning && j.Status.Restarts == 1 && ok && p.Status.Phase == ""
	})
	if !h.rec.find("Warning WorkerFailed j: worker "+w) || !h.rec.find("container worker exited 137 (OOMKilled); retry 1 of 1") {
		t.Errorf("events:\n%s", h.rec.all())
	}
}

// An image that cannot be pulled ends the job with a condition naming the pod, the container
// and the image: at once when no retry can help, after the pull grace otherwise.
func TestImagePullFailures(t *testing.T) {
	opts := testOptions()
	opts.ImagePullGrace = 300 * time.Millisecond
	h := newHarness(t, opts, cluster(2, 8)...)
	h.createJob(hpcJob("never", 1, nil))
	h.createJob(hpcJob("backoff", 1, nil))
	h.eventually("both running", func() bool {
		return h.phase("hpc", "never") == v1alpha1.PhaseRunning && h.phase("hpc", "backoff") == v1alpha1.PhaseRunning
	})
	waiting := func(reason string) func(*corev1.PodStatus) {
		return func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", Image: "localhost/nope:dev",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "image not present"}}}}
		}
	}
	h.updateStatus("hpc", "never-worker-0", waiting("ErrImageNeverPull"))
	start := time.Now()
	h.updateStatus("hpc", "backoff-worker-0", waiting("ImagePullBackOff"))
	msg := h.finishedWith("hpc", "never", v1alpha1.PhaseFailed, ReasonImagePull)
	want := `worker pod never-worker-0: container worker cannot get image "localhost/nope:dev": ErrImageNeverPull: image not present`
	if msg != want {
		t.Errorf("Finished message %q, want %q", msg, want)
	}
	h.finishedWith("hpc", "backoff", v1alpha1.PhaseFailed, ReasonImagePull)
	if waited := time.Since(start); waited < opts.ImagePullGrace {
		t.Errorf("a pull the kubelet retries failed the job after %v, before the %v grace", waited, opts.ImagePullGrace)
	}
}

// activeDeadlineSeconds fails a job that runs too long; ttlSecondsAfterFinished deletes it.
func TestDeadlineAndTTL(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	deadline, ttl := int64(1), int32(1)
	h.createJob(hpcJob("j", 1, func(s *v1alpha1.HPCJobSpec) {
		s.RunPolicy.ActiveDeadlineSeconds = &deadline
		s.RunPolicy.TTLSecondsAfterFinished = &ttl
		s.RunPolicy.CleanPodPolicy = v1alpha1.CleanPodPolicyAll
	}))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.setReady("hpc", "j-launcher")
	msg := h.finishedWith("hpc", "j", v1alpha1.PhaseFailed, ReasonDeadline)
	if !strings.Contains(msg, "activeDeadlineSeconds (1 s)") {
		t.Errorf("Finished message %q", msg)
	}
	h.eventually("every pod deleted (cleanPodPolicy All)", func() bool { return len(h.pods("hpc")) == 0 })
	h.eventually("the job deleted after its TTL", func() bool {
		_, err := h.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("hpc").Get(context.Background(), "j", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// cleanPodPolicy None leaves every pod as it is.
func TestCleanPodPolicyNone(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createJob(hpcJob("j", 2, func(s *v1alpha1.HPCJobSpec) { s.RunPolicy.CleanPodPolicy = v1alpha1.CleanPodPolicyNone }))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	h.setPhase("hpc", "j-launcher", corev1.PodSucceeded)
	h.finishedWith("hpc", "j", v1alpha1.PhaseSucceeded, ReasonCompleted)
	h.never("a pod deleted under cleanPodPolicy None", 300*time.Millisecond, func() bool { return len(h.pods("hpc")) != 2 })
}

// A launcher deleted by someone fails the job (no retries by default).
func TestDeletedLauncherFailsTheJob(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(1, 8)...)
	h.createJob(hpcJob("j", 1, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	if err := h.kube.CoreV1().Pods("hpc").Delete(context.Background(), "j-launcher", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.finishedWith("hpc", "j", v1alpha1.PhaseFailed, ReasonLauncherGone)
}

// Six host-network workers over three nodes: each node's workers get distinct ports, the same
// ports repeat across nodes, and the hostfile and SSH configuration name every worker with its
// own; the launcher waits for all six.
func TestHostNetworkJobOverSeveralNodes(t *testing.T) {
	h := newHarness(t, testOptions(), cluster(3, 2)...)
	h.createJob(hpcJob("j", 6, func(s *v1alpha1.HPCJobSpec) {
		s.Granularity = v1alpha1.GranularityFine
		s.MPIImplementation = v1alpha1.MPICH
		s.LauncherCreationPolicy = v1alpha1.WaitForWorkersReady
		s.Worker.Spec.HostNetwork = true
	}))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	job := h.job("hpc", "j")
	portsOn := map[string][]int32{}
	portOf := map[string]int32{}
	for _, pl := range job.Status.Placements {
		p, _ := h.lookup("hpc", pl.Worker)
		port := p.Spec.Containers[0].Ports[0].HostPort
		portsOn[pl.Node] = append(portsOn[pl.Node], port)
		portOf[pl.Worker] = port
	}
	if len(portsOn) != 3 {
		t.Fatalf("workers on %d nodes, want 3: %v", len(portsOn), portsOn)
	}
	for node, ports := range portsOn {
		if len(ports) != 2 || ports[0] == ports[1] || min(ports[0], ports[1]) != 20000 || max(ports[0], ports[1]) != 20001 {
			t.Errorf("node %s: worker ports %v, want 20000 and 20001", node, ports)
		}
	}
	cm, err := h.kube.CoreV1().ConfigMaps("hpc").Get(context.Background(), "j-hostfile", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		w := v1alpha1.WorkerName("j", i)
		if !strings.Contains(cm.Data[mpi.HostfileKey], w+".j-workers.hpc.svc:1\n") {
			t.Errorf("MPICH hostfile lacks %s:\n%s", w, cm.Data[mpi.HostfileKey])
		}
		if want := "Host " + w + ".j-workers.hpc.svc " + w + ".j-workers\n    Port " + itoa(int(portOf[w])) + "\n"; !strings.Contains(cm.Data[mpi.SSHConfigKey], want) {
			t.Errorf("ssh_config lacks %q", want)
		}
	}
	for i, pl := range job.Status.Placements {
		h.never("launcher created before every worker is ready", 50*time.Millisecond, func() bool {
			_, ok := h.lookup("hpc", "j-launcher")
			return ok
		})
		h.setReady("hpc", pl.Worker)
		if i == len(job.Status.Placements)-1 {
			h.eventually("launcher created", func() bool {
				_, ok := h.lookup("hpc", "j-launcher")
				return ok
			})
		}
	}
}

// mpirun fails as soon as it loses a worker, often before the worker's own end is seen: the job's
// condition then names the worker, not the launcher.
func TestLauncherFailingFirstStillNamesTheLostWorker(t *testing.T) {
	opts := testOptions()
	opts.LauncherFailureGrace = 2 * time.Second
	h := newHarness(t, opts, cluster(2, 8)...)
	h.createJob(hpcJob("j", 4, nil))
	h.eventually("job running", func() bool { return h.phase("hpc", "j") == v1alpha1.PhaseRunning })
	worker := h.job("hpc", "j").Status.Placements[0].Worker
	h.setPhase("hpc", "j-launcher", corev1.PodFailed)
	time.Sleep(300 * time.Millisecond)
	h.updateStatus("hpc", worker, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}}}
	})
	msg := h.finishedWith("hpc", "j", v1alpha1.PhaseFailed, ReasonWorkerFailed)
	if !strings.Contains(msg, worker) {
		t.Errorf("Finished message %q does not name worker %s", msg, worker)
	}
}
