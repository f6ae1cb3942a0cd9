package slurmbridge

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
