package sim

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

func TestServiceLatency(t *testing.T) {
	for _, c := range []struct {
		name                 string
		rate, capacity, want float64
	}{
		{"idle", 0, 2, 0.010},
		{"at 60 % the 25 ms target", 120, 2, 0.025},
		{"at 90 %", 180, 2, 0.100},
		{"overloaded: capped at 99 %", 1000, 2, 1},
		{"no CPU at all: the same cap", 100, 0, 1},
	} {
		if got := ServiceLatency(0.010, c.rate, c.capacity); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: latency %v, want %v", c.name, got, c.want)
		}
	}
	prev := math.Inf(1)
	for cores := 0.5; cores <= 8; cores += 0.5 {
		l := ServiceLatency(0.010, 300, cores)
		if l > prev {
			t.Fatalf("latency grows with CPU: %v on %v cores after %v", l, cores, prev)
		}
		prev = l
	}
}

func TestProvisionedMilliMeetsTheTargetAtPeak(t *testing.T) {
	for _, rate := range []float64{50, 200, 354, 400} {
		s := GenisysService{MeanRate: rate, Amplitude: 0.6, Period: time.Hour, Work: 0.010, Target: 0.025}
		p := s.ProvisionedMilli()
		if p%1000 != 0 {
			t.Fatalf("rate %v: %dm is not whole cores", rate, p)
		}
		peak := rate * 1.6
		if l := ServiceLatency(s.Work, peak, float64(p)/1000); l > s.Target+1e-12 {
			t.Errorf("rate %v: %dm gives %v at the peak, over the target", rate, p, l)
		}
		if l := ServiceLatency(s.Work, peak, float64(p-1000)/1000); l <= s.Target {
			t.Errorf("rate %v: a core less (%dm) still meets the target (%v): not the least", rate, p-1000, l)
		}
	}
}

func TestGenisysWorkloads(t *testing.T) {
	for _, name := range GenisysWorkloads {
		a, err := GenisysWorkloadOf(name, 2)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := GenisysWorkloadOf(name, 2)
		c, _ := GenisysWorkloadOf(name, 3)
		if !slices.EqualFunc(a.Jobs, b.Jobs, func(x, y GenisysJob) bool { return x.Submit == y.Submit && slices.Equal(x.Steps, y.Steps) }) ||
			!slices.Equal(a.Services, b.Services) {
			t.Errorf("%s: the same seed drew different workloads", name)
		}
		if name != "pilot" && slices.Equal(a.Services, c.Services) {
			t.Errorf("%s: seeds 2 and 3 drew the same services", name)
		}
		shape := genisysShapes[name]
		if len(a.Services) != shape.services || len(a.Jobs) != shape.jobs {
			t.Errorf("%s: %d services and %d jobs, want %d and %d", name, len(a.Services), len(a.Jobs), shape.services, shape.jobs)
		}
		for i, j := range a.Jobs {
			if i > 0 && j.Submit < a.Jobs[i-1].Submit {
				t.Errorf("%s: jobs not in submission order", name)
			}
			if j.Submit < genisysWarmup || j.Submit > genisysWarmup+shape.window {
				t.Errorf("%s: %s submitted at %v, outside the window", name, j.Name, j.Submit)
			}
			for _, s := range j.Steps {
				if !slices.Contains(shape.tasks, s.Tasks) || s.Runtime < shape.minRuntime || s.Runtime > shape.maxRun {
					t.Errorf("%s: step %s (%d tasks, %v) outside the shape", name, s.Name, s.Tasks, s.Runtime)
				}
			}
		}
	}
	if _, err := GenisysWorkloadOf("huge", 1); err == nil {
		t.Error("an unknown workload was accepted")
	}
}

// Slurm fills its nodes in order, refuses a step that does not fit and gets its CPUs back.
func TestStaticClusterSlurmFillsNodes(t *testing.T) {
	w := &GenisysWorkload{Jobs: []GenisysJob{{Steps: []GenisysStep{{Tasks: 20}, {Tasks: 10}, {Tasks: 8}}}}}
	c := newStaticCluster([]genisysNode{{cpus: 16, kube: 16}, {cpus: 16, slurm: 16}, {cpus: 16, slurm: 12}}, w)
	ranks, ok, _ := c.start(0, 0)
	if !ok || !slices.Equal(ranks, []int{0, 16, 4}) {
		t.Fatalf("20 tasks: %v %v, want node 2 filled, then 4 on node 3", ranks, ok)
	}
	if _, ok, _ := c.start(0, 1); ok {
		t.Fatal("10 tasks started on 8 free CPUs")
	}
	if ranks, ok, _ := c.start(0, 2); !ok || !slices.Equal(ranks, []int{0, 0, 8}) {
		t.Fatalf("8 tasks: %v %v, want node 3's last 8", ranks, ok)
	}
	_ = c.finish(0)
	if ranks, ok, _ := c.start(0, 1); !ok || !slices.Equal(ranks, []int{0, 10, 0}) {
		t.Fatalf("10 tasks after the first step ended: %v %v", ranks, ok)
	}
}

// kube-scheduler places a service at its peak size, least-allocated, on its own CPUs only; what
// fits nowhere stays pending.
func TestStaticClusterKubeScheduler(t *testing.T) {
	s := GenisysService{Name: "web", MeanRate: 500, Amplitude: 0.6, Period: time.Hour, Work: 0.010, Target: 0.025, MaxPodCPUMilli: 4000, MaxReplicas: 8}
	// 500 × 1.6 × 10 ms / 0.6 = 13.3 → 14 cores: 4 pods of 3,500m.
	w := &GenisysWorkload{Services: []GenisysService{s}}
	c := newStaticCluster([]genisysNode{{cpus: 16, slurm: 16}, {cpus: 16, slurm: 12, kube: 4}, {cpus: 16, slurm: 12, kube: 4}, {cpus: 16, slurm: 8, kube: 8}}, w)
	var nodes []int
	for _, p := range c.pods(0) {
		if p.milli != 3500 {
			t.Errorf("pod of %dm, want 3500m", p.milli)
		}
		nodes = append(nodes, p.node)
	}
	if !slices.Equal(nodes, []int{1, 2, 3, 3}) || c.pending[0] != 0 {
		t.Errorf("pods on nodes %v (%d pending), want 1, 2, 3, 3", nodes, c.pending[0])
	}
	c = newStaticCluster([]genisysNode{{cpus: 16, kube: 8}}, w)
	if len(c.pods(0)) != 2 || c.pending[0] != 2 {
		t.Errorf("8 CPUs: %d pods placed and %d pending, want 2 and 2", len(c.pods(0)), c.pending[0])
	}
}

// Where Slurm and kube-scheduler oversubscribe a node, everything on it is time-shared and
// interferes: a 16-rank step beside 8 cores of service work on 16 CPUs (U = 1.5) takes 1.5 × 1.1
// = 1.65 times as long, and the service, getting 1/1.65 of its CPU, misses its target the whole
// while.
func TestUnmanagedOversubscription(t *testing.T) {
	w := &GenisysWorkload{
		Services: []GenisysService{{Name: "web", MeanRate: 800, Period: time.Hour, Work: 0.010, Target: 0.025, MaxPodCPUMilli: 4000, MaxReplicas: 8}},
		Jobs:     []GenisysJob{{Name: "job", Submit: 20 * time.Second, Steps: []GenisysStep{{Name: "step", Tasks: 16, Runtime: 100 * time.Second}}}},
	}
	r, err := simulateGenisys(w, newStaticCluster([]genisysNode{{cpus: 16, slurm: 16, kube: 16}}, w), false)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Steps[0]; math.Abs(s.NormalizedTime-1.65) > 1e-9 || s.Start != 20 {
		t.Errorf("step ran %v–%v (normalised %v), want 20–185 (1.65)", s.Start, s.End, s.NormalizedTime)
	}
	if r.ServiceViolationSeconds != 165 || r.SevereViolationSeconds != 165 {
		t.Errorf("%v s of violation (%v s severe), want the step's 165 s", r.ServiceViolationSeconds, r.SevereViolationSeconds)
	}
	// Without the service the step runs at full speed.
	alone := &GenisysWorkload{Jobs: w.Jobs}
	r, err = simulateGenisys(alone, newStaticCluster([]genisysNode{{cpus: 16, slurm: 16, kube: 16}}, alone), false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps[0].NormalizedTime != 1 || r.TotalTime != 100 {
		t.Errorf("alone: normalised %v, total %v s, want 1 and 100 s", r.Steps[0].NormalizedTime, r.TotalTime)
	}
}

// The placer places finegrain's steps: an 8-task step's workers go in five task groups (2, 2, 2,
// 1, 1), most-loaded giving a larger one to the node the service's pod loads, least-loaded a
// smaller one.
func TestFinegrainClusterPlacementPolicies(t *testing.T) {
	topo, _, err := LoadMachine(GenisysMachine)
	if err != nil {
		t.Fatal(err)
	}
	w := &GenisysWorkload{
		Services: []GenisysService{{Name: "web", MeanRate: 100, Period: time.Hour, Work: 0.010, Target: 0.025, MaxPodCPUMilli: 4000, MaxReplicas: 8}},
		Jobs:     []GenisysJob{{Name: "job", Steps: []GenisysStep{{Name: "job-step-1", Tasks: 8, Runtime: time.Minute}}}},
	}
	beside := map[v1alpha1.PlacementPolicy]int{}
	for _, p := range []v1alpha1.PlacementPolicy{v1alpha1.LeastLoaded, v1alpha1.MostLoaded} {
		c, err := newFinegrainCluster(p, topo, w)
		if err != nil {
			t.Fatal(err)
		}
		svcNode := c.pods(0)[0].node
		ranks, ok, err := c.start(0, 0)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", p, ok, err)
		}
		sorted := slices.Clone(ranks)
		slices.Sort(sorted)
		if !slices.Equal(sorted, []int{1, 1, 2, 2, 2}) {
			t.Errorf("%s: ranks %v, want groups of 2, 2, 2, 1, 1", p, ranks)
		}
		beside[p] = ranks[svcNode]
		if err := c.finish(0); err != nil {
			t.Fatal(err)
		}
	}
	if beside[v1alpha1.MostLoaded] != 2 || beside[v1alpha1.LeastLoaded] != 1 {
		t.Errorf("ranks beside the service: most-loaded %d, least-loaded %d; want 2 and 1", beside[v1alpha1.MostLoaded], beside[v1alpha1.LeastLoaded])
	}
}

// serviceTestCluster is a least-loaded finegrain cluster with one 1-core service and one step
// of 75 tasks (every node's pinnable CPUs) to start.
func serviceTestCluster(t *testing.T) *finegrainCluster {
	t.Helper()
	topo, _, err := LoadMachine(GenisysMachine)
	if err != nil {
		t.Fatal(err)
	}
	w := &GenisysWorkload{
		Services: []GenisysService{{Name: "web", MeanRate: 100, Period: time.Hour, Work: 0.010, Target: 0.025, MaxPodCPUMilli: 4000, MaxReplicas: 8}},
		Jobs:     []GenisysJob{{Name: "job", Steps: []GenisysStep{{Name: "job-step-1", Tasks: 75, Runtime: time.Minute}}}},
	}
	c, err := newFinegrainCluster(v1alpha1.LeastLoaded, topo, w)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serviceCPU is the CPU a finegrain service's running pods have.
func serviceCPU(c *finegrainCluster, k int) int64 {
	var m int64
	for _, p := range c.pods(k) {
		m += p.milli
	}
	return m
}

// finegrain's services follow the objective law: a violation grows the service, a long
// over-performance shrinks it, and what the steps hold is never given to a service.
func TestFinegrainClusterServiceControl(t *testing.T) {
	c := serviceTestCluster(t)
	if got := serviceCPU(c, 0); got != 1000 {
		t.Fatalf("a new service has %dm, want the thesis's one core", got)
	}
	if _, err := c.control(10*time.Second, []float64{0.050}); err != nil {
		t.Fatal(err)
	}
	if got := serviceCPU(c, 0); got != 2000 || len(c.pods(0)) != 1 {
		t.Fatalf("at twice the target: %dm in %d pods, want 2000m in place", got, len(c.pods(0)))
	}
	if _, ok, err := c.start(20*time.Second, 0); ok || err != nil {
		t.Fatalf("75 tasks fit beside the service's 2 cores on 80 CPUs with one shared CPU a node: %v %v", ok, err)
	}
	for k := range 40 {
		if _, err := c.control(time.Duration(30+10*k)*time.Second, []float64{0.011}); err != nil {
			t.Fatal(err)
		}
	}
	if got := serviceCPU(c, 0); got != 1000 {
		t.Errorf("after 40 periods at 11 ms: %dm, want the minimum 1000m", got)
	}
}

// A growth the pod's node has no room for waits, as the kubelet defers it; the next period the
// law, told growth in place is blocked, adds a replica where there is room.
func TestFinegrainClusterBlockedGrowth(t *testing.T) {
	c := serviceTestCluster(t)
	// 75 ranks: every node's 15 pinnable CPUs; the service's node has nothing left, the others
	// their shared CPU.
	if _, ok, err := c.start(0, 0); !ok || err != nil {
		t.Fatalf("75 tasks beside a 1-core service: %v %v", ok, err)
	}
	home := c.pods(0)[0].node
	if _, err := c.control(10*time.Second, []float64{0.050}); err != nil {
		t.Fatal(err)
	}
	if p := c.svc[0].pods[0]; serviceCPU(c, 0) != 1000 || p.want != 2000 {
		t.Fatalf("growth on a full node: %dm running, %dm wanted; want 1000m running, 2000m waiting", serviceCPU(c, 0), p.want)
	}
	if _, err := c.control(20*time.Second, []float64{0.050}); err != nil {
		t.Fatal(err)
	}
	pods := c.pods(0)
	if serviceCPU(c, 0) != 2000 || len(pods) != 2 || pods[1].node == home || c.svc[0].pods[0].want != 1000 {
		t.Fatalf("blocked: pods %v, want a second 1-core replica off node %d and the first no longer waiting", pods, home)
	}
}

// finegrain pins every rank and keeps services to what the requests leave: no step is ever
// slowed, and the run is the same every time.
func TestRunGenisysDeterministic(t *testing.T) {
	w, err := GenisysWorkloadOf("small", 2)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]bytes.Buffer
	for i := range out {
		rs, err := RunGenisys(&w)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Scenario != GenisysDedicated || rs[0].NormalizedTotalTime != 1 {
			t.Fatalf("first result %s normalised %v, want Dedicated at 1", rs[0].Scenario, rs[0].NormalizedTotalTime)
		}
		for _, s := range rs[0].Steps {
			if s.NormalizedTurnaround != 1 {
				t.Errorf("Dedicated's step %s has turnaround %v of its own", s.Name, s.NormalizedTurnaround)
			}
		}
		for _, r := range rs {
			if r.Scenario != GenisysUnmanaged && r.MaxNormalizedStepTime != 1 {
				t.Errorf("%s: a step ran %v times its dedicated time without oversubscription", r.Scenario, r.MaxNormalizedStepTime)
			}
			if r.Utilization <= 0 || r.Utilization > 1 {
				t.Errorf("%s: utilisation %v", r.Scenario, r.Utilization)
			}
		}
		if err := WriteGenisysJSON(&out[i], &GenisysReport{Results: rs}); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Error("two runs of the same workload differ")
	}
}

// BenchmarkGenisys runs the large workload under every scenario (one run of make
// experiment-genisys's largest table); cpu-s/op is the process's user and system time per run.
func BenchmarkGenisys(b *testing.B) {
	w, err := GenisysWorkloadOf("large", 2)
	if err != nil {
		b.Fatal(err)
	}
	cpu := cpuSeconds(b)
	for b.Loop() {
		if _, err := RunGenisys(&w); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds(b)-cpu)/float64(b.N), "cpu-s/op")
}
