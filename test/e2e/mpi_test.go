//go:build e2e

// Real MPI on the real cluster: an HPCJob of the MPI image runs `mpirun hpcc` with Open MPI and
// with MPICH, whose ranks start through the job's SSH identity inside the worker, which the node
// agent pinned; every rank is in the worker container's cgroup, confined to its pinned CPUs and
// its NUMA node's memory; HPCC succeeds; everything the job made goes after its TTL. And the
// ways a run fails: a worker killed mid-run, a launcher that exits 1 within and beyond its
// backoff limit, an image that is not there.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// mpiTimeout bounds one MPI job's run: pods start in seconds, HPCC at N=1000 runs for a few
// seconds per rank on this machine, slower when it is loaded.
const mpiTimeout = 4 * time.Minute

// hpccInput is an hpccinf.txt for tasks ranks at a matrix order small enough that HPCC ends in
// seconds.
func hpccInput(t *testing.T, tasks int) string {
	t.Helper()
	s := hpcc.DefaultSizing(tasks, 256<<20)
	s.N = hpcc.MinN
	in, err := hpcc.Size(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := in.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// mpiJob is an HPCJob of the MPI image on the host's network: workers of one task each (one per
// task, granularity "granularity"), the hpccinf ConfigMap at rank 0's working directory, and a
// launcher running command (sh -c).
func mpiJob(name string, impl v1alpha1.MPIImplementation, tasks int, command string) *v1alpha1.HPCJob {
	ctr := func(name string) corev1.Container {
		c := framework.Container(name, framework.MPIImage)
		c.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
		return c
	}
	launcher := ctr("mpirun")
	launcher.Args = []string{"sh", "-c", command}
	worker := ctr("worker")
	worker.Resources = corev1.ResourceRequirements{}
	worker.VolumeMounts = []corev1.VolumeMount{{Name: "hpccinf", MountPath: "/root/hpccinf.txt", SubPath: "hpccinf.txt", ReadOnly: true}}
	return &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.HPCJobSpec{
			Tasks: int32(tasks), Profile: v1alpha1.ProfileCPU, Granularity: v1alpha1.GranularityFine,
			TaskResources:     v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("256Mi")},
			Gang:              v1alpha1.GangPolicy{TimeoutSeconds: 60},
			MPIImplementation: impl,
			Launcher: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{launcher},
			}},
			Worker: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{worker},
				Volumes: []corev1.Volume{{Name: "hpccinf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: name + "-hpccinf"}}}}},
			}},
		},
	}
}

// hpccCommand runs HPCC and prints rank 0's result file into the launcher's log, over plain ssh
// to the first worker.
func hpccCommand(job string) string {
	return fmt.Sprintf("mpirun hpcc && ssh %s.%s cat hpccoutf.txt", v1alpha1.WorkerName(job, 0), v1alpha1.ServiceName(job))
}

// startMPIJob deploys finegrain, creates the job's hpccinf ConfigMap and the job, and returns
// the cluster, the namespace and the CPUs one NUMA node offers.
func startMPIJob(t *testing.T, job *v1alpha1.HPCJob) (*framework.Cluster, string) {
	t.Helper()
	c, free := deployPlacer(t)
	c.RequireCPUManagerPolicy(t, "none")
	if int(job.Spec.Tasks) > free {
		t.Skipf("the node has %d CPU to pin in one NUMA node; this job of %d one-CPU workers needs as many", free, job.Spec.Tasks)
	}
	ns := c.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-hpccinf"},
		Data: map[string]string{"hpccinf.txt": hpccInput(t, int(job.Spec.Tasks))}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createJob(t, c, ns, job)
	c.DumpOnFailure(t, ns)
	return c, ns
}

// waitPhase waits until the job reaches phase and returns it; a job ending in another phase
// fails the test at once.
func waitPhase(t *testing.T, c *framework.Cluster, ns, name string, phase v1alpha1.Phase, timeout time.Duration) *v1alpha1.HPCJob {
	t.Helper()
	var job *v1alpha1.HPCJob
	framework.Eventually(t, "HPCJob "+name+" to be "+string(phase), timeout, func(ctx context.Context) error {
		var err error
		if job, err = getJob(ctx, c, ns, name); err != nil {
			return err
		}
		switch p := job.Status.Phase; {
		case p == phase:
			return nil
		case p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed:
			return framework.Permanent(fmt.Errorf("the job ended %s, not %s: %+v", p, phase, job.Status.Conditions))
		default:
			return fmt.Errorf("phase %q, conditions %+v", p, job.Status.Conditions)
		}
	})
	return job
}

// agentPin is the CPUs the node agent published for a pod's container, and the NUMA node.
func agentPin(ctx context.Context, c *framework.Cluster, ns, pod, container string) (cpuset.CPUSet, int, error) {
	u, err := c.Dynamic.Resource(nrt.GroupVersionResource).Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		return cpuset.CPUSet{}, 0, err
	}
	obj, err := nrt.FromUnstructured(u)
	if err != nil {
		return cpuset.CPUSet{}, 0, err
	}
	for _, z := range obj.Zones {
		v, _ := nrt.AttributeValue(z.Attributes, nrt.AttrPins)
		pins, err := nrt.ParsePins(v)
		if err != nil {
			return cpuset.CPUSet{}, 0, err
		}
		for _, p := range pins {
			if p.Namespace == ns && p.Pod == pod && p.Container == container {
				numa, err := strconv.Atoi(strings.TrimPrefix(z.Name, nrt.ZonePrefix))
				return p.CPUs, numa, err
			}
		}
	}
	return cpuset.CPUSet{}, 0, fmt.Errorf("no pin of %s/%s/%s in the NodeResourceTopology of %s yet", ns, pod, container, c.NodeName)
}

// rank is an MPI rank process as the kernel shows it.
type rank struct {
	pid        int
	comm       string
	cgroup     string
	cpus, mems string
}

// ranksIn reads the processes named comm (every process when comm is empty) in a container's
// cpuset cgroup directory from /proc.
func ranksIn(dir, comm string) ([]rank, error) {
	procs, err := framework.ReadCgroupFile(dir, "cgroup.procs")
	if err != nil {
		return nil, err
	}
	var out []rank
	for _, f := range strings.Fields(procs) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup.procs of %s: %q", dir, f)
		}
		name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || (comm != "" && strings.TrimSpace(string(name)) != comm) {
			continue
		}
		r := rank{pid: pid, comm: strings.TrimSpace(string(name))}
		cg, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		status, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err1 != nil || err2 != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(cg), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[0] == "0" || strings.Contains(","+parts[1]+",", ",cpuset,")) {
				r.cgroup = parts[2]
			}
		}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Cpus_allowed_list":
				r.cpus = strings.TrimSpace(v)
			case "Mems_allowed_list":
				r.mems = strings.TrimSpace(v)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// watchRanks polls the workers' cgroups until the job ends, checking every hpcc rank it sees
// against its worker's pin, and returns how many distinct ranks it checked.
func watchRanks(t *testing.T, c *framework.Cluster, ns, name string) int {
	t.Helper()
	seen := map[int]bool{}
	deadline := time.Now().Add(mpiTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		job, err := getJob(ctx, c, ns, name)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if p := job.Status.Phase; p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed {
			cancel()
			return len(seen)
		}
		for _, pl := range job.Status.Placements {
			pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, pl.Worker, metav1.GetOptions{})
			if err != nil {
				continue
			}
			dir, err := framework.ContainerCgroup(framework.CgroupRoot, pod, "worker", "cpuset")
			if err != nil {
				continue
			}
			ranks, err := ranksIn(dir, "hpcc")
			if err != nil || len(ranks) == 0 {
				continue
			}
			pin, numa, err := agentPin(ctx, c, ns, pl.Worker, "worker")
			if err != nil {
				t.Errorf("rank %d runs in worker %s, which the agent does not report pinned: %v", ranks[0].pid, pl.Worker, err)
				continue
			}
			for _, r := range ranks {
				if seen[r.pid] {
					continue
				}
				seen[r.pid] = true
				allowed, err := cpuset.Parse(r.cpus)
				if err != nil || !allowed.IsSubsetOf(pin) || allowed.IsEmpty() {
					t.Errorf("rank %d of worker %s may run on CPUs %q, outside the worker's pin %s", r.pid, pl.Worker, r.cpus, pin)
				}
				if r.mems != strconv.Itoa(numa) || numa != int(pl.NUMANode) {
					t.Errorf("rank %d of worker %s may use memory of NUMA nodes %q; the worker is pinned to NUMA node %d (placed on %d)", r.pid, pl.Worker, r.mems, numa, pl.NUMANode)
				}
				if !strings.HasSuffix(dir, r.cgroup) || r.cgroup == "" {
					t.Errorf("rank %d is in cgroup %q, not in its worker's container cgroup %s", r.pid, r.cgroup, dir)
				}
				t.Logf("rank pid %d in worker %s: cgroup %s, Cpus_allowed_list %s (pin %s), Mems_allowed_list %s", r.pid, pl.Worker, r.cgroup, r.cpus, pin, r.mems)
			}
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("HPCJob %s/%s did not end within %v", ns, name, mpiTimeout)
	return 0
}

// launcherLog is the launcher's log.
func launcherLog(t *testing.T, c *framework.Cluster, ns, job string) string {
	t.Helper()
	data, err := c.Client.CoreV1().Pods(ns).GetLogs(v1alpha1.LauncherName(job), &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read the launcher's log: %v", err)
	}
	return string(data)
}

// waitGone waits until nothing of the job is left: the job, its pods, Secret, ConfigMap and
// Service (its TTL deletes the job; the garbage collector the rest).
func waitGone(t *testing.T, c *framework.Cluster, ns, job string) {
	t.Helper()
	framework.Eventually(t, "HPCJob "+job+" and everything it owned to be deleted", 2*time.Minute, func(ctx context.Context) error {
		var left []string
		if _, err := getJob(ctx, c, ns, job); !apierrors.IsNotFound(err) {
			left = append(left, "the HPCJob")
		}
		core := c.Client.CoreV1()
		if _, err := core.Secrets(ns).Get(ctx, v1alpha1.SSHSecretName(job), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Secret "+v1alpha1.SSHSecretName(job))
		}
		if _, err := core.ConfigMaps(ns).Get(ctx, v1alpha1.HostfileName(job), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ConfigMap "+v1alpha1.HostfileName(job))
		}
		if _, err := core.Services(ns).Get(ctx, v1alpha1.ServiceName(job), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Service "+v1alpha1.ServiceName(job))
		}
		pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob + "=" + job})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			left = append(left, "pod "+p.Name)
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// noPins waits until the agent holds no pin of the namespace: every CPU is back.
func noPins(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	framework.Eventually(t, "every pinned CPU of "+ns+" back in the shared pool", 30*time.Second, func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(nrt.GroupVersionResource).Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj, err := nrt.FromUnstructured(u)
		if err != nil {
			return err
		}
		for _, z := range obj.Zones {
			v, _ := nrt.AttributeValue(z.Attributes, nrt.AttrPins)
			pins, _ := nrt.ParsePins(v)
			for _, p := range pins {
				if p.Namespace == ns {
					return fmt.Errorf("%s/%s still holds CPUs %s", p.Pod, p.Container, p.CPUs)
				}
			}
		}
		return nil
	})
}

func runHPCC(t *testing.T, impl v1alpha1.MPIImplementation, tasks int) {
	name := "hpcc-" + strings.ToLower(string(impl))
	job := mpiJob(name, impl, tasks, hpccCommand(name))
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](5)
	c, ns := startMPIJob(t, job)
	running := waitPhase(t, c, ns, name, v1alpha1.PhaseRunning, placerTimeout)
	if len(running.Status.Placements) != tasks {
		t.Fatalf("%d workers placed, want %d", len(running.Status.Placements), tasks)
	}
	checked := watchRanks(t, c, ns, name)
	done := waitPhase(t, c, ns, name, v1alpha1.PhaseSucceeded, time.Minute)
	if checked < tasks {
		t.Errorf("saw %d hpcc ranks in the workers' cgroups while the job ran, want %d", checked, tasks)
	}
	if done.Status.LauncherCreationTime == nil || done.Status.StartTime == nil || done.Status.LauncherCreationTime.Before(done.Status.StartTime) {
		t.Errorf("launcher created at %v, workers bound at %v: the launcher waits for its workers", done.Status.LauncherCreationTime, done.Status.StartTime)
	}
	log := launcherLog(t, c, ns, name)
	runs, err := hpcc.Parse(strings.NewReader(log))
	if err != nil {
		t.Fatalf("HPCC's result is not in the launcher's log: %v\n%s", err, log)
	}
	h, err := runs[len(runs)-1].Headline()
	if err != nil || !h.Success {
		t.Fatalf("HPCC did not succeed (Success=%v, %v):\n%s", h.Success, err, log)
	}
	for _, f := range h.Figures() {
		t.Logf("%s (%s): %v %s measured=%v", f.Benchmark, f.Key, f.Value, f.Unit, f.Measured)
	}
	noPins(t, c, ns)
	waitGone(t, c, ns, name)
}

func TestMPIOpenMPIRunsHPCCInPinnedWorkers(t *testing.T) { runHPCC(t, v1alpha1.OpenMPI, 1) }

func TestMPIMPICHRunsHPCCInPinnedWorkers(t *testing.T) { runHPCC(t, v1alpha1.MPICH, 1) }

// Two workers, each one rank, talking through SSH-started daemons: only where the node has two
// CPUs to pin (not on a two-CPU machine, whose shared pool keeps one).
func TestMPITwoWorkersRunHPCC(t *testing.T) { runHPCC(t, v1alpha1.OpenMPI, 2) }

// finishedWith waits for the job to end Failed with reason and returns the condition's message.
func failedWith(t *testing.T, c *framework.Cluster, ns, name, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	framework.Eventually(t, "HPCJob "+name+" to fail with "+reason, timeout, func(ctx context.Context) error {
		job, err := getJob(ctx, c, ns, name)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(job.Status.Conditions, controller.ConditionFinished)
		if job.Status.Phase != v1alpha1.PhaseFailed || cond == nil {
			return fmt.Errorf("phase %q, conditions %+v", job.Status.Phase, job.Status.Conditions)
		}
		if cond.Reason != reason {
			return framework.Permanent(fmt.Errorf("the job failed with %s (%s), not %s", cond.Reason, cond.Message, reason))
		}
		msg = cond.Message
		return nil
	})
	return msg
}

// A worker whose processes are killed while its ranks run fails the job, naming the worker;
// nothing of the job keeps running and its CPUs return.
func TestMPIWorkerKilledMidRunFailsTheJob(t *testing.T) {
	name := "killed"
	job := mpiJob(name, v1alpha1.OpenMPI, 1, "mpirun sleep 600")
	c, ns := startMPIJob(t, job)
	running := waitPhase(t, c, ns, name, v1alpha1.PhaseRunning, placerTimeout)
	worker := running.Status.Placements[0].Worker
	var dir string
	framework.Eventually(t, "the rank (sleep) to run in worker "+worker, mpiTimeout, func(ctx context.Context) error {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, worker, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if dir, err = framework.ContainerCgroup(framework.CgroupRoot, pod, "worker", "cpuset"); err != nil {
			return err
		}
		ranks, err := ranksIn(dir, "sleep")
		if err != nil {
			return err
		}
		if len(ranks) == 0 {
			return fmt.Errorf("no rank in %s yet", dir)
		}
		return nil
	})
	procs, err := framework.ReadCgroupFile(dir, "cgroup.procs")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(procs) {
		pid, _ := strconv.Atoi(f)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatalf("kill %d of worker %s: %v", pid, worker, err)
		}
	}
	t.Logf("killed every process of worker %s (%s)", worker, filepath.Base(dir))
	msg := failedWith(t, c, ns, name, controller.ReasonWorkerFailed, time.Minute)
	if !strings.Contains(msg, worker) {
		t.Errorf("the Finished condition %q does not name worker %s", msg, worker)
	}
	noPins(t, c, ns)
	framework.Eventually(t, "no pod of the job running", time.Minute, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJob + "=" + name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
				return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
}

// A launcher that exits 1 is created again once (backoffLimit 1), then the job fails.
func TestMPILauncherRetriedOnceThenFails(t *testing.T) {
	name := "retry"
	job := mpiJob(name, v1alpha1.MPICH, 1, "mpirun true && exit 1")
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
	c, ns := startMPIJob(t, job)
	msg := failedWith(t, c, ns, name, controller.ReasonLauncherFail, mpiTimeout)
	if !strings.Contains(msg, "exited 1") || !strings.Contains(msg, "runPolicy.backoffLimit 1 reached") {
		t.Errorf("the Finished condition %q does not say the launcher exited 1 and the limit was reached", msg)
	}
	final, err := getJob(context.Background(), c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status.Restarts != 1 {
		t.Errorf("status.restarts %d, want 1", final.Status.Restarts)
	}
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + controller.ReasonRestarting})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no %s event on the job (%v)", controller.ReasonRestarting, err)
	}
	noPins(t, c, ns)
}

// A worker image that is not on the node fails the job at once with a condition naming it,
// rather than leaving it waiting.
func TestMPIMissingImageFailsClearly(t *testing.T) {
	name := "noimage"
	job := mpiJob(name, v1alpha1.OpenMPI, 1, hpccCommand(name))
	job.Spec.Worker.Spec.Containers[0].Image = "localhost/finegrain-no-such-image:dev"
	c, ns := startMPIJob(t, job)
	msg := failedWith(t, c, ns, name, controller.ReasonImagePull, placerTimeout)
	if !strings.Contains(msg, "localhost/finegrain-no-such-image:dev") || !strings.Contains(msg, v1alpha1.WorkerName(name, 0)) {
		t.Errorf("the Finished condition %q does not name the worker and its image", msg)
	}
	noPins(t, c, ns)
	if _, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), v1alpha1.LauncherName(name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a launcher was created for workers that never started (%v)", err)
	}
}
