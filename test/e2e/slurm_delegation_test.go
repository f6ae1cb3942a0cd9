//go:build e2e

// Slurm delegation on the real cluster (docs/slurm.md): two virtual clusters on three
// nodes whose real Slurm holds every job until the placer's bridge has bound and the agents have
// pinned its placeholder pods. An MPI job submitted with sbatch runs with every process on its
// placeholders' pinned CPUs, away from a service pod of the shared pool; a job that does not fit
// waits in squeue with finegrain's reason and starts when the first ends; scancel returns the
// CPUs; kill -9 of the placer (the bridge runs in it) mid-job is reconciled both ways. alice's
// virtual cluster has a shared volume, so the MPI job's slurm-<id>.out, written on the node that
// ran its batch script, is read in the controller pod where it was submitted; a third virtual
// cluster, whose shared volume's claim does not exist, says so and makes no pods.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/slurmbridge"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// affinityScript is the MPI job: Open MPI's mpirun starts one rank per task through Slurm (srun
// launches its daemons, so every rank runs under a slurmstepd of the job; finegrain's TaskProlog
// starts each task on its placeholder's CPUs, where Open MPI binds its ranks), and each rank prints
// its rank, Slurm node (the nodes of the local cluster share the host's name) and
// Cpus_allowed_list once the agent has had a few ticks to confine it, then
// idles until scancel.
const affinityScript = `mpirun sh -c 'sleep 3; echo "rank $OMPI_COMM_WORLD_RANK $SLURMD_NODENAME $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"; exec sleep 600'`

func TestSlurmDelegation(t *testing.T) {
	c := deployNodes(t)
	framework.Eventually(t, "the VirtualCluster CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(v1alpha1.VirtualClusterGroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
	ns := c.Namespace(t)
	// A service pod of the shared pool on every node.
	for _, n := range c.Nodes {
		createPod(t, c, ns, fillerPod("service-"+n.Name, n.Name, "100m"))
	}
	home := sharedClaim(t, c, ns, "alice-home")
	createVirtualClustersWith(t, c, ns, map[string]string{"alice": "alice-home", "bob": "", "carol": "nowhere"})
	// After the virtual clusters' cleanup was registered, so that a failure dumps their pods
	// before they go.
	c.DumpOnFailure(t, ns)
	start := time.Now()
	waitVCReady(t, c, ns, "alice")
	waitVCReady(t, c, ns, "bob")
	t.Logf("both virtual clusters Ready after %s", time.Since(start).Round(time.Second))
	cond := waitSharedVolumeUnusable(t, c, ns, "carol", "nowhere")
	t.Logf("carol, whose claim does not exist: Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)

	// 1. alice's MPI job over two nodes and bob's one-node job run at the same time; exclusive
	// nodes (the bridge's default) put them on different nodes. alice submits from her shell's
	// working directory, the shared volume, and the job writes there (no --output: Slurm's
	// default slurm-<id>.out).
	mpiJob := sbatch(t, c, ns, "alice", "--nodes=2", "--ntasks-per-node=1", "--wrap", affinityScript)
	if dir := jobField(t, c, ns, "alice", mpiJob, "%Z"); dir != v1alpha1.DefaultSharedMountPath {
		t.Fatalf("alice's job %s was submitted in %q, want the shared volume's %s", mpiJob, dir, v1alpha1.DefaultSharedMountPath)
	}
	mpiOut := filepath.Join(v1alpha1.DefaultSharedMountPath, "slurm-"+mpiJob+".out")
	bobJob := sbatch(t, c, ns, "bob", "--nodes=1", "--wrap", "exec sleep 600")
	mpiPins := waitJobRunning(t, c, ns, "alice", mpiJob, 2)
	bobPins := waitJobRunning(t, c, ns, "bob", bobJob, 1)
	for node := range bobPins {
		if _, shared := mpiPins[node]; shared {
			t.Errorf("bob's job %s and alice's job %s both hold node %s (pins %v, %v)", bobJob, mpiJob, node, bobPins, mpiPins)
		}
	}
	t.Logf("alice's job %s on %v, bob's job %s on %v, both running %s after the VirtualClusters were Ready", mpiJob, mpiPins, bobJob, bobPins, time.Since(start).Round(time.Second))

	// 2. Every rank printed CPUs of its placeholder's pin, every process of both jobs runs in its
	// placeholder's cpuset, and neither the service pods nor the slurmd pods share those CPUs.
	// The ranks' lines are read in alice's controller pod: the batch script's node wrote them on
	// the shared volume.
	var ranks []string
	framework.Eventually(t, "both ranks of the MPI job to print their CPUs", time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "-n", ns, "exec", "alice-slurmctld", "--", "cat", mpiOut)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if ranks = rankLines(out); len(ranks) != 2 {
			return fmt.Errorf("output so far: %q", out)
		}
		return nil
	})
	for _, line := range ranks {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("rank line %q, want: rank N HOST CPUS", line)
		}
		cpus, err := cpuset.Parse(f[3])
		pin, ok := mpiPins[f[2]]
		if err != nil || !ok || !cpus.IsSubsetOf(pin) {
			t.Errorf("rank line %q: CPUs not within the pin %s of alice's placeholder on node %s (%v)", line, pin, f[2], err)
		}
	}
	t.Logf("ranks: %q", ranks)
	jobConfined(t, c, ns, "alice", mpiJob, mpiPins)
	jobConfined(t, c, ns, "bob", bobJob, bobPins)

	// 3. A second job of alice over two nodes does not fit (bob holds the third node): it stays
	// pending, squeue showing finegrain's reason in its comment column.
	waiting := sbatch(t, c, ns, "alice", "--nodes=2", "--wrap", "exec sleep 600")
	framework.Eventually(t, "squeue to show the second job pending with finegrain's reason", time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "-n", ns, "exec", "alice-slurmctld", "--", "squeue", "--noheader", "--jobs="+waiting)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if f := strings.Fields(out); len(f) < 5 || f[4] != "PD" || !strings.Contains(out, "finegrain: waiting for placement") {
			return fmt.Errorf("squeue: %q", out)
		}
		return nil
	})
	t.Logf("pending: %s", strings.TrimSpace(vcExec(t, c, ns, "alice-slurmctld", "squeue", "--jobs="+waiting)))

	// 4. scancel of the MPI job: Slurm ends it (mpirun and its daemons take their time), then
	// its placeholders are gone within a second, their CPUs back in the shared pool, and the
	// waiting job starts on them.
	cancelled := time.Now()
	vcExec(t, c, ns, "alice-slurmctld", "scancel", mpiJob)
	framework.Eventually(t, "job "+mpiJob+" to end", time.Minute, func(ctx context.Context) error {
		if state := jobField(t, c, ns, "alice", mpiJob, "%T"); state != "CANCELLED" {
			return fmt.Errorf("job %s is %s", mpiJob, state)
		}
		return nil
	})
	ended := time.Now()
	for len(placeholders(t, c, ns, "alice", mpiJob)) > 0 {
		if time.Since(ended) > 5*time.Second {
			t.Fatalf("job %s's placeholders still there %s after it ended", mpiJob, time.Since(ended))
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(ended)
	if gone > time.Second {
		t.Errorf("job %s's placeholders went %s after it ended, want within a second", mpiJob, gone)
	}
	framework.Eventually(t, "the nodes' free-core maps to drop job "+mpiJob+"'s pins", 30*time.Second, func(ctx context.Context) error {
		for node := range mpiPins {
			pins, err := nodePins(ctx, c, node)
			if err != nil {
				return err
			}
			for key := range pins {
				if strings.HasPrefix(key, ns+"/alice-slurm-"+mpiJob+"-") {
					return fmt.Errorf("node %s still pins %s", node, key)
				}
			}
		}
		return nil
	})
	freed := time.Since(ended)
	waitingPins := waitJobRunning(t, c, ns, "alice", waiting, 2)
	t.Logf("scancel → job ended %s → placeholders deleted %s later, their pins gone from the nodes' free-core maps %s later; the waiting job %s running on %v %s after scancel",
		ended.Sub(cancelled).Round(time.Millisecond), gone.Round(time.Millisecond), freed.Round(time.Millisecond), waiting, waitingPins, time.Since(cancelled).Round(time.Millisecond))
	// The MPI job's output, read in the controller pod once the job is over (its placeholders
	// gone, the next job running), holds both ranks' lines and slurmstepd's note of the
	// cancellation, written on the batch script's node as the job ended; it is a file of the
	// shared volume's directory on this host.
	out := vcExec(t, c, ns, "alice-slurmctld", "cat", mpiOut)
	if got := rankLines(out); !slices.Equal(got, ranks) || !strings.Contains(out, "*** JOB "+mpiJob+" ON ") || !strings.Contains(out, " CANCELLED AT ") {
		t.Errorf("%s in alice's controller pod after job %s ended: %q, want the ranks' lines %q and slurmstepd's CANCELLED line", mpiOut, mpiJob, out, ranks)
	}
	if onHost, err := os.ReadFile(filepath.Join(home, filepath.Base(mpiOut))); err != nil || string(onHost) != out {
		t.Errorf("the shared volume's directory %s on the host holds %q (%v) as %s, the controller pod reads %q", home, onHost, err, filepath.Base(mpiOut), out)
	}

	// 5. kill -9 of the placer mid-job. While it is down, alice's running job is cancelled (its
	// placeholders are left without their job) and bob's placeholder is deleted (his job runs
	// without it). The restarted placer's bridge reconciles both ways.
	killPlacer(t, c)
	killed := time.Now()
	vcExec(t, c, ns, "alice-slurmctld", "scancel", waiting)
	for _, p := range placeholders(t, c, ns, "bob", bobJob) {
		if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, "the restarted placer to reconcile both virtual clusters", 2*time.Minute, func(ctx context.Context) error {
		if p := placeholders(t, c, ns, "alice", waiting); len(p) > 0 {
			return fmt.Errorf("cancelled job %s still has placeholders %s", waiting, podNames(p))
		}
		if state := jobField(t, c, ns, "bob", bobJob, "%T"); state == "RUNNING" {
			return fmt.Errorf("bob's job %s still runs without its placeholder", bobJob)
		}
		return nil
	})
	t.Logf("kill -9 of the placer → reconciled %s later: bob's job %s is %s", time.Since(killed).Round(time.Millisecond), bobJob, jobField(t, c, ns, "bob", bobJob, "%T"))
	// From now on no job of either cluster runs without its placeholders, and none is left
	// without its job.
	framework.Consistently(t, "every running job with its placeholders, every placeholder with its job", 3*time.Second, func(ctx context.Context) error {
		for _, vc := range []string{"alice", "bob"} {
			if err := placeholdersMatchJobs(ctx, c, ns, vc); err != nil {
				return err
			}
		}
		return nil
	})
}

// rankLines are the lines of a job's output that the affinity script's ranks printed.
func rankLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "rank ") {
			lines = append(lines, line)
		}
	}
	return lines
}

// sbatch submits a batch job in the virtual cluster's controller pod and returns its ID.
func sbatch(t *testing.T, c *framework.Cluster, ns, vc string, args ...string) string {
	t.Helper()
	out := vcExec(t, c, ns, vc+"-slurmctld", append([]string{"sbatch", "--parsable"}, args...)...)
	id := strings.TrimSpace(out)
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		t.Fatalf("%s: sbatch printed %q, not a job ID", vc, out)
	}
	return id
}

// jobField is one squeue field (a --format letter) of a job, ended or not.
func jobField(t *testing.T, c *framework.Cluster, ns, vc, job, format string) string {
	t.Helper()
	return strings.TrimSpace(vcExec(t, c, ns, vc+"-slurmctld", "squeue", "--noheader", "--states=all", "--jobs="+job, "--format="+format))
}

// placeholders are the bridge's placeholder pods of a Slurm job that have not been deleted.
func placeholders(t *testing.T, c *framework.Cluster, ns, vc, job string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: placeholderSelector(vc, job)})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func placeholderSelector(vc, job string) string {
	sel := slurmbridge.LabelWorkload + "=" + slurmbridge.WorkloadSlurmJob + "," + v1alpha1.LabelVirtualCluster + "=" + vc
	if job != "" {
		sel += "," + slurmbridge.LabelSlurmJob + "=" + job
	}
	return sel
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// waitJobRunning waits until Slurm runs the job on the nodes of its placeholders, one per node,
// each pinned by its node's agent, and returns the pins by node.
func waitJobRunning(t *testing.T, c *framework.Cluster, ns, vc, job string, nodes int) map[string]cpuset.CPUSet {
	t.Helper()
	framework.Eventually(t, vc+"'s job "+job+" to run", 2*time.Minute, func(ctx context.Context) error {
		if state := jobField(t, c, ns, vc, job, "%T"); state != "RUNNING" {
			return fmt.Errorf("job %s is %s (%s)", job, state, jobField(t, c, ns, vc, job, "%k"))
		}
		return nil
	})
	pods := placeholders(t, c, ns, vc, job)
	if len(pods) != nodes {
		t.Fatalf("job %s runs with placeholders %s, want %d", job, podNames(pods), nodes)
	}
	pins := map[string]cpuset.CPUSet{}
	var names []string
	for i := range pods {
		pins[pods[i].Spec.NodeName] = pinOf(t, c, &pods[i], slurmbridge.ContainerName).cpus
		names = append(names, pods[i].Spec.NodeName)
	}
	slices.Sort(names)
	nodeList := jobField(t, c, ns, vc, job, "%N")
	if got := strings.Fields(vcExec(t, c, ns, vc+"-slurmctld", "scontrol", "show", "hostnames", nodeList)); len(pins) != nodes || !slices.Equal(got, names) {
		t.Fatalf("job %s runs on %s, its placeholders on %v", job, got, names)
	}
	return pins
}

// jobConfined checks every node of a running job: each process in the placeholder's cpuset
// cgroup (but its pause) has Cpus_allowed_list within the pin and one of them is the job's
// slurmstepd; none of the job's processes is left in the slurmd container; and neither the slurmd
// pod nor the node's service pod carries a CPU of the pin.
func jobConfined(t *testing.T, c *framework.Cluster, ns, vc, job string, pins map[string]cpuset.CPUSet) {
	t.Helper()
	for _, p := range placeholders(t, c, ns, vc, job) {
		pin := pins[p.Spec.NodeName]
		slurmd, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), vc+"-slurmd-"+p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		service, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "service-"+p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "job "+job+"'s processes on node "+p.Spec.NodeName+" in its placeholder's cpuset", 10*time.Second, func(ctx context.Context) error {
			procs, err := containerProcesses(c, &p, slurmbridge.ContainerName)
			if err != nil {
				return err
			}
			stepd := false
			for _, pr := range procs {
				if pr.comm == "pause" {
					continue
				}
				stepd = stepd || pr.comm == "slurmstepd"
				if cpus, err := cpuset.Parse(pr.cpus); err != nil || !cpus.IsSubsetOf(pin) {
					return fmt.Errorf("process %d (%s) in the placeholder has Cpus_allowed_list %s, the pin is %s", pr.pid, pr.comm, pr.cpus, pin)
				}
			}
			if !stepd {
				return fmt.Errorf("no slurmstepd in the placeholder's cgroup yet: %+v", procs)
			}
			left, err := containerProcesses(c, slurmd, "slurmd")
			if err != nil {
				return err
			}
			for _, pr := range left {
				if slices.Contains([]string{"slurmstepd", "sleep", "orted", "mpirun", "sh"}, pr.comm) {
					return fmt.Errorf("process %d (%s) of a job still runs in the slurmd container, on CPUs %s", pr.pid, pr.comm, pr.cpus)
				}
			}
			for _, other := range []struct {
				pod       *corev1.Pod
				container string
			}{{slurmd, "slurmd"}, {service, "load"}} {
				dir, err := c.CgroupDir(other.pod, other.container, "cpuset")
				if err != nil {
					return err
				}
				v, err := framework.ReadCgroupFile(dir, "cpuset.cpus")
				if err != nil {
					return err
				}
				cpus, err := cpuset.Parse(v)
				if err != nil {
					return err
				}
				if !cpus.Intersection(pin).IsEmpty() {
					return fmt.Errorf("pod %s runs on CPUs %s, sharing the pin %s of %s", other.pod.Name, cpus, pin, p.Name)
				}
			}
			return nil
		})
	}
}

// containerProcesses lists every process of a container's cpuset cgroup.
func containerProcesses(c *framework.Cluster, pod *corev1.Pod, container string) ([]rank, error) {
	dir, err := c.CgroupDir(pod, container, "cpuset")
	if err != nil {
		return nil, err
	}
	return ranksIn(dir, "")
}

// placeholdersMatchJobs checks one virtual cluster: every running job has a running placeholder
// on each of its nodes, and every placeholder belongs to a job that has not ended.
func placeholdersMatchJobs(ctx context.Context, c *framework.Cluster, ns, vc string) error {
	out, err := c.Kubectl(ctx, "-n", ns, "exec", vc+"-slurmctld", "--", "squeue", "--noheader", "--states=all", "--format=%i %T %D")
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: placeholderSelector(vc, "")})
	if err != nil {
		return err
	}
	running := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running[p.Labels[slurmbridge.LabelSlurmJob]]++
		}
	}
	active := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		switch f[1] {
		case "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED":
			active[f[0]] = true
			if n, _ := strconv.Atoi(f[2]); running[f[0]] < n {
				return fmt.Errorf("%s's job %s is %s with %d running placeholders for %d nodes", vc, f[0], f[1], running[f[0]], n)
			}
		case "PENDING":
			active[f[0]] = true
		}
	}
	for _, p := range pods.Items {
		if job := p.Labels[slurmbridge.LabelSlurmJob]; p.DeletionTimestamp == nil && !active[job] {
			return fmt.Errorf("%s's placeholder %s belongs to job %s, which has ended (squeue: %q)", vc, p.Name, job, out)
		}
	}
	return nil
}

// killPlacer sends SIGKILL to the placer's process (the bridge runs in it) and returns at once:
// the kubelet restarts the container, and the new process leads once the old Lease expires.
func killPlacer(t *testing.T, c *framework.Cluster) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(framework.SystemNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=finegrain-placer"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the placer's pod: %v (%d pods)", err, len(pods.Items))
	}
	procs, err := containerProcesses(c, &pods.Items[0], "placer")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(procs, func(p rank) bool { return p.comm == "placer" })
	if i < 0 {
		t.Fatalf("no process named placer in the placer's container: %+v", procs)
	}
	if err := syscall.Kill(procs[i].pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", procs[i].pid, err)
	}
}
