package slurmbridge

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/slurmtest"
)

// The bridge against a real slurmctld and two slurmd (Slurm nodes n1 and n2 on Kubernetes nodes
// kube-a and kube-b) with finegrain's job_submit.lua, Kubernetes faked: a submitted job is held
// and gets its placeholder; its comment in Slurm says why it waits; bound to kube-b and pinned,
// it runs on n2 and nowhere else; when it has run, its placeholder goes. A second job is
// cancelled while the bridge runs its loop: its placeholder goes within a pass or two.
func TestBridgeAgainstRealSlurm(t *testing.T) {
	s := slurmtest.Start(t)
	h := newHarness(t)
	h.cl.Slurm = s.Client
	h.cl.Nodes = map[string]string{"kube-a": "n1", "kube-b": "n2"}
	ctx := context.Background()

	id := s.Sbatch(t, "-n", "2", "--mem=100M", "-o", "out-%j", "--wrap", "echo ran on $SLURMD_NODENAME")
	h.sync(map[slurm.JobID][]Action{id: {Placed}})
	pod := fmt.Sprintf("vc1-slurm-%s-0", id)
	h.sync(map[slurm.JobID][]Action{id: {Commented}})
	if j := s.Job(t, id); !j.Held() || !strings.HasPrefix(j.Comment, CommentPrefix+"waiting for the placer") {
		t.Fatalf("job %+v: want held, its comment saying it waits for the placer", j)
	}
	h.bind(pod, "kube-b")
	h.pins["kube-b/"+pod+"/"+ContainerName] = "1"
	h.sync(map[slurm.JobID][]Action{id: {Started}})
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to complete", func() bool { return s.Job(t, id).Ended() })
	if j := s.Job(t, id); j.State != slurm.StateCompleted || j.NodeList != "n2" {
		t.Fatalf("job %+v: want COMPLETED on n2", j)
	}
	if out, _ := os.ReadFile(fmt.Sprintf("%s/work/out-%s", s.Dir, id)); strings.TrimSpace(string(out)) != "ran on n2" {
		t.Fatalf("job output %q, want \"ran on n2\"", out)
	}
	h.sync(map[slurm.JobID][]Action{id: {Released}})
	if len(h.pods()) != 0 || len(h.podGroups()) != 0 {
		t.Fatalf("after the job: pods %v, PodGroups %v", podNames(h.pods()), h.podGroups())
	}

	long := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	h.sync(map[slurm.JobID][]Action{long: {Placed}})
	pod = fmt.Sprintf("vc1-slurm-%s-0", long)
	h.bind(pod, "kube-a")
	h.pins["kube-a/"+pod+"/"+ContainerName] = "1"
	h.sync(map[slurm.JobID][]Action{long: {Started}})
	slurmtest.WaitFor(t, 20*time.Second, "job "+long.String()+" to run", func() bool { return s.Job(t, long).Active() })

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		h.b.Run(runCtx, func(context.Context) ([]*Cluster, error) { return []*Cluster{h.cl}, nil })
		close(done)
	}()
	defer func() { stop(); <-done }()
	if _, err := s.Runner.Run(ctx, []string{"scancel", long.String()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	slurmtest.WaitFor(t, 10*time.Second, "the cancelled job's placeholder to go", func() bool { return len(h.pods()) == 0 })
	t.Logf("scancel to placeholder deleted: %v (interval %v)", time.Since(start).Round(time.Millisecond), h.b.opts.Interval)
}

// Restarts against the real Slurm: after slurmctld is killed with SIGKILL and started again on
// its saved state, the job runs on its placeholder's node, which it keeps; a bridge that restarts to find a running job without its placeholder
// requeues it held and places it again; a job released behind the bridge's back is held again
// (or, if Slurm started it already, requeued held).
func TestBridgeRestartsAgainstRealSlurm(t *testing.T) {
	s := slurmtest.Start(t)
	h := newHarness(t)
	h.cl.Slurm = s.Client
	h.cl.Nodes = map[string]string{"kube-a": "n1", "kube-b": "n2"}
	ctx := context.Background()

	id := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	h.sync(map[slurm.JobID][]Action{id: {Placed}})
	pod := fmt.Sprintf("vc1-slurm-%s-0", id)
	h.bind(pod, "kube-a")
	h.pins["kube-a/"+pod+"/"+ContainerName] = "1"
	h.sync(map[slurm.JobID][]Action{id: {Started}})
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to run", func() bool { return s.Job(t, id).Active() })

	// 1. slurmctld crashes and comes back. Slurm saves its state every few seconds, so it may
	// come back with the job still held (the release lost): the bridge then starts it again,
	// on its placeholder's node, where it runs again from the start.
	s.RestartController(t)
	acts, err := h.b.Sync(ctx, h.cl)
	if err != nil {
		t.Fatal(err)
	}
	if a := acts[id]; len(acts) > 1 || (len(a) > 0 && !slices.Equal(a, []Action{Started})) {
		t.Fatalf("actions after slurmctld's restart %v, want none or job %s started again", acts, id)
	}
	t.Logf("after slurmctld's restart the bridge did %v", acts[id])
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to run on n1", func() bool {
		j := s.Job(t, id)
		return j.Active() && j.NodeList == "n1"
	})
	if len(h.pods()) != 1 {
		t.Fatalf("placeholders %v after slurmctld's restart, want the job's one", podNames(h.pods()))
	}

	// 2. The bridge restarts and finds the job running without its placeholder.
	if err := h.kube.CoreV1().Pods("hpc").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.b = New(h.kube, h.dyn, h.pins, h.waits, h.b.log, h.b.opts)
	h.sync(map[slurm.JobID][]Action{id: {Requeued}})
	slurmtest.WaitFor(t, 20*time.Second, "job "+id.String()+" to be held again", func() bool { return s.Job(t, id).Held() })
	h.sync(map[slurm.JobID][]Action{id: {Placed}})

	// 3. Released by hand (root may) before the bridge placed it.
	loose := s.Sbatch(t, "-n", "1", "-o", "/dev/null", "--wrap", "sleep 120")
	if _, err := s.Runner.Run(ctx, []string{"scontrol", "release", loose.String()}); err != nil {
		t.Fatal(err)
	}
	acts, err = h.b.Sync(ctx, h.cl)
	if err != nil {
		t.Fatal(err)
	}
	if a := acts[loose]; len(a) != 1 || (a[0] != Held && a[0] != Requeued) {
		t.Fatalf("actions on the job released by hand %v, want held or requeued", a)
	}
	slurmtest.WaitFor(t, 20*time.Second, "job "+loose.String()+" to be held", func() bool { return s.Job(t, loose).Held() })
}
