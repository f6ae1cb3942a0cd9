package sim

import (
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/finegrain-dev/finegrain/pkg/placer/elastic"
)

// oneType is a model of one type that makes times easy to follow: a timestep takes 1/n s on n
// replicas (measured on every count from 2 to 8), a rescale 1 s to checkpoint and 1 s to
// restart, no load balancing.
func oneType() ElasticModel {
	var steps []ScalePoint
	for n := 2; n <= 8; n++ {
		steps = append(steps, ScalePoint{n, 1 / float64(n)})
	}
	return ElasticModel{
		Types:          []ElasticType{{Name: "t", Min: 2, Max: 8, Timesteps: 800, Steps: steps}},
		CheckpointBase: 1, RestartBase: 1,
	}
}

// A high-priority job shrinks a running low-priority one for its start, which waits for the
// victim's checkpoint; when it ends, the victim grows back to its maximum. Worked by hand on
// 10 slots, rescale gap 0.
func TestSimulateElasticShrinkThenExpand(t *testing.T) {
	m := oneType()
	jobs := []ElasticJob{
		{Name: "low", Arrival: 0, Type: "t", Priority: 1, Min: 2, Max: 8, Timesteps: 800},
		{Name: "high", Arrival: 50 * time.Second, Type: "t", Priority: 5, Min: 2, Max: 8, Timesteps: 800},
	}
	r, err := SimulateElastic(jobs, Elastic, ElasticOptions{Model: m, Slots: 10})
	if err != nil {
		t.Fatal(err)
	}
	// low starts with min(10 − 1, 8) = 8 replicas; at 50 s high finds 1 slot free, shrinks low
	// to its minimum (6 slots freed; 7 − 1 = 6 < 8, so all it can) and starts with 6 once low
	// has checkpointed (51 s). low did 400 steps, stalls to 52 s, runs at 2 replicas. high ends
	// at 51 + 800/6; low has done 2 × (184.33 − 52) more steps, grows to 8 (2 s stall) and ends.
	highEnd := 51 + 800.0/6
	lowLeft := 400 - 2*(highEnd-52)
	lowEnd := highEnd + 2 + lowLeft/8
	want := []ElasticJobResult{
		{Name: "low", Type: "t", Priority: 1, Submit: 0, Start: 0, End: lowEnd, Replicas: 8, Shrinks: 1, Expands: 1},
		{Name: "high", Type: "t", Priority: 5, Submit: 50, Start: 51, End: highEnd, Replicas: 6},
	}
	if diff := cmp.Diff(want, r.Jobs, cmp.Comparer(near)); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	wantM := ElasticMetrics{
		TotalTime: lowEnd, Makespan: lowEnd,
		WeightedMeanResponse: 5.0 / 6, OverallResponse: 0.5,
		WeightedMeanCompletion: (lowEnd + 5*(highEnd-50)) / 6,
		// high's slots count from 50 s: they are held while low checkpoints.
		Utilization: (8*50 + (2+6)*(highEnd-50) + 8*(lowEnd-highEnd)) / (10 * lowEnd),
	}
	if diff := cmp.Diff(wantM, r.Metrics, cmp.Comparer(near)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	// The same jobs under the other strategies: nothing is rescaled, high waits for low.
	for _, tc := range []struct {
		s                   ElasticStrategy
		highStart, replicas float64
	}{{RigidMin, 0, 2}, {RigidMax, 100, 8}, {Moldable, 100, 8}} {
		r, err := SimulateElastic(jobs, tc.s, ElasticOptions{Model: m, Slots: 10})
		if err != nil {
			t.Fatal(err)
		}
		h := r.Jobs[1]
		wantStart := math.Max(50, tc.highStart)
		if !near(h.Start, wantStart) || h.Replicas != int(tc.replicas) || h.Shrinks+h.Expands+r.Jobs[0].Shrinks+r.Jobs[0].Expands != 0 {
			t.Errorf("%s: high %+v, low %+v; want high to start at %v with %v replicas, nothing rescaled", tc.s, h, r.Jobs[0], wantStart, tc.replicas)
		}
	}
}

// The rescale gap, counted from a job's start or last rescale, protects it from newJob and holds
// its growth back. low starts with 8 replicas at 0 s; mid (needs 2 and a launcher, 1 slot free)
// arrives at 30 s, inside low's gap, and waits; high arrives at 70 s, past the gap, shrinks low
// to 4 and starts after low's checkpoint (71 s) for 10 s. When high ends, completeJob starts mid
// (2 of the 5 free slots and a launcher) but cannot grow low, rescaled at 70 s; the simulation
// wakes when low's gap ends (130 s) and low grows into the 2 slots left.
func TestSimulateElasticRescaleGap(t *testing.T) {
	m := oneType()
	jobs := []ElasticJob{
		{Name: "low", Arrival: 0, Type: "t", Priority: 1, Min: 2, Max: 8, Timesteps: 8000},
		{Name: "mid", Arrival: 30 * time.Second, Type: "t", Priority: 3, Min: 2, Max: 2, Timesteps: 8000},
		{Name: "high", Arrival: 70 * time.Second, Type: "t", Priority: 5, Min: 4, Max: 4, Timesteps: 40},
	}
	r, err := SimulateElastic(jobs, Elastic, ElasticOptions{Model: m, Slots: 10, RescaleGap: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The wake-up comes a microsecond after the gap's end.
	at := func(got, want float64) bool { return math.Abs(got-want) < 1e-5 }
	low, mid, high := r.Jobs[0], r.Jobs[1], r.Jobs[2]
	if !at(high.Start, 71) || !at(high.End, 81) || high.Replicas != 4 {
		t.Errorf("high %+v, want 4 replicas from 71 s (low's checkpoint takes 1 s) to 81 s", high)
	}
	if !at(mid.Start, 81) || mid.Replicas != 2 {
		t.Errorf("mid %+v, want 2 replicas from 81 s, when high ends", mid)
	}
	if low.Shrinks != 1 || low.Expands != 1 {
		t.Errorf("low %+v, want one shrink and one expand", low)
	}
	grown := false
	for _, u := range r.Usage {
		if at(u.At, 130) && u.Used == 8 {
			grown = true
		}
		if u.At > 81.5 && u.At < 129 && u.Used != 6 {
			t.Errorf("%d slots in use at %v s; low (4) and mid (2) until low's gap ends at 130 s", u.Used, u.At)
		}
	}
	if !grown {
		t.Errorf("low did not grow to 6 (8 slots in use) at 130 s: %+v", r.Usage)
	}
}

// newJob's shrink rule: under the paper's, a job shrinks a running job of its own priority;
// under the placer's (ShrinkLowerOnly) only one of strictly lower priority, so an equal one
// waits for the running job's end. On 10 slots, first starts with 8 replicas and ends at 100 s
// unless shrunk; second (priority 3) arrives at 50 s and either shrinks first to its minimum,
// starting with 6 after first's checkpoint (51 s), or waits and starts with 8 at 100 s.
func TestSimulateElasticShrinkLowerOnly(t *testing.T) {
	m := oneType()
	for _, tc := range []struct {
		firstPrio   int32
		lowerOnly   bool
		start       float64
		replicas    int
		firstShrunk int
	}{
		{3, false, 51, 6, 1},
		{3, true, 100, 8, 0},
		{2, false, 51, 6, 1},
		{2, true, 51, 6, 1},
	} {
		jobs := []ElasticJob{
			{Name: "first", Arrival: 0, Type: "t", Priority: tc.firstPrio, Min: 2, Max: 8, Timesteps: 800},
			{Name: "second", Arrival: 50 * time.Second, Type: "t", Priority: 3, Min: 2, Max: 8, Timesteps: 800},
		}
		r, err := SimulateElastic(jobs, Elastic, ElasticOptions{Model: m, Slots: 10, ShrinkLowerOnly: tc.lowerOnly})
		if err != nil {
			t.Fatal(err)
		}
		first, second := r.Jobs[0], r.Jobs[1]
		if !near(second.Start, tc.start) || second.Replicas != tc.replicas || first.Shrinks != tc.firstShrunk {
			t.Errorf("first of priority %d, lower only %v: second %+v, first %+v; want second to start at %v s with %d replicas, first shrunk %d times",
				tc.firstPrio, tc.lowerOnly, second, first, tc.start, tc.replicas, tc.firstShrunk)
		}
	}
	// On 20 slots with a priority-2 and a priority-3 job running at 8 replicas (2 slots free),
	// a priority-3 arrival that can start by shrinking the lower one alone: the paper's rule
	// goes on to take 1 replica of the equal one for its maximum, the placer's does not.
	for _, lowerOnly := range []bool{false, true} {
		jobs := []ElasticJob{
			{Name: "lower", Arrival: 0, Type: "t", Priority: 2, Min: 2, Max: 8, Timesteps: 800},
			{Name: "equal", Arrival: 0, Type: "t", Priority: 3, Min: 2, Max: 8, Timesteps: 800},
			{Name: "second", Arrival: 50 * time.Second, Type: "t", Priority: 3, Min: 2, Max: 8, Timesteps: 800},
		}
		r, err := SimulateElastic(jobs, Elastic, ElasticOptions{Model: m, Slots: 20, ShrinkLowerOnly: lowerOnly})
		if err != nil {
			t.Fatal(err)
		}
		wantReplicas, wantEqual := 8, 1
		if lowerOnly {
			wantReplicas, wantEqual = 7, 0
		}
		if lower, equal, second := r.Jobs[0], r.Jobs[1], r.Jobs[2]; lower.Shrinks != 1 || equal.Shrinks != wantEqual || second.Replicas != wantReplicas {
			t.Errorf("lower only %v: lower %+v, equal %+v, second %+v; want lower shrunk, equal shrunk %d times, second at %d replicas",
				lowerOnly, lower, equal, second, wantEqual, wantReplicas)
		}
	}
}

// Over seeds, the figures are each seed's own run's, and every seed has a best strategy on
// every metric; seed 4 at 90 s is the golden one.
func TestRunElasticSeeds(t *testing.T) {
	m := DefaultElasticModel()
	o := ElasticOptions{Model: m, Slots: 64, RescaleGap: time.Minute}
	r, err := RunElasticSeeds("cmd", o, ElasticStrategies, 20, 3, 3, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Seeds, []uint64{3, 4, 5}) || len(r.Metrics) != 3 {
		t.Fatalf("seeds %v, %d results", r.Seeds, len(r.Metrics))
	}
	jobs, _ := GenerateElastic(&m, 20, 4, 90*time.Second)
	for _, s := range ElasticStrategies {
		one, err := SimulateElastic(jobs, s, o)
		if err != nil {
			t.Fatal(err)
		}
		if one.Metrics != r.Metrics[1][s] {
			t.Errorf("seed 4 %s: %+v, alone %+v", s, r.Metrics[1][s], one.Metrics)
		}
	}
	best := r.Best()
	for k, counts := range best {
		total := 0
		for _, c := range counts {
			total += c
		}
		if total < 3 {
			t.Errorf("metric %d: best counts %v over 3 seeds", k, counts)
		}
	}
	// Seed 4 alone: elastic has the best utilisation, moldable the best weighted completion.
	four, err := RunElasticSeeds("cmd", o, ElasticStrategies, 20, 4, 1, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b := four.Best(); b[1][Elastic] != 1 || b[3][Moldable] != 1 || b[3][Elastic] != 0 {
		t.Errorf("seed 4 best: %v", b)
	}
	var out strings.Builder
	if err := WriteElasticSeedsMarkdown(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 seeds of 20 jobs submitted 1m30s apart on 64 slots", "| 4 | 2876 / 51 % / 51 / 587 |", "| elastic | "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := RunElasticSeeds("cmd", o, ElasticStrategies, 20, 1, 0, 0); err == nil {
		t.Error("0 seeds accepted")
	}
}

// Aging lets a long-waiting low-priority job overtake a later high-priority one: without it the
// high job starts first when the running job ends; at 3,600 per hour of waiting, low (90 s,
// 1 + 90) outranks high (80 s, 5 + 80).
func TestSimulateElasticAging(t *testing.T) {
	m := oneType()
	jobs := []ElasticJob{
		{Name: "first", Arrival: 0, Type: "t", Priority: 3, Min: 8, Max: 8, Timesteps: 800},
		{Name: "low", Arrival: 10 * time.Second, Type: "t", Priority: 1, Min: 8, Max: 8, Timesteps: 800},
		{Name: "high", Arrival: 20 * time.Second, Type: "t", Priority: 5, Min: 8, Max: 8, Timesteps: 800},
	}
	for _, tc := range []struct {
		aging     elastic.Aging
		low, high float64
	}{{elastic.Aging{}, 200, 100}, {elastic.Aging{PerHour: 3600}, 100, 200}} {
		r, err := SimulateElastic(jobs, Moldable, ElasticOptions{Model: m, Slots: 10, Aging: tc.aging})
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.Jobs[1].Start, tc.low) || !near(r.Jobs[2].Start, tc.high) {
			t.Errorf("aging %+v: low starts at %v, high at %v; want %v and %v", tc.aging, r.Jobs[1].Start, r.Jobs[2].Start, tc.low, tc.high)
		}
	}
}

// The experiment's job set of seed 4 at a 90 s submission gap: elastic has the best
// utilisation (the paper's ordering; on the measured model it no longer has the best total time,
// docs/experiments.md), and every figure as the model gives it today (a change to the policy or
// the model shows here).
func TestElasticSeed4Golden(t *testing.T) {
	m := DefaultElasticModel()
	jobs, err := GenerateElastic(&m, 20, 4, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[ElasticStrategy]ElasticMetrics{}
	for _, s := range ElasticStrategies {
		r, err := SimulateElastic(jobs, s, ElasticOptions{Model: m, Slots: 64, RescaleGap: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got[s] = r.Metrics
	}
	for _, s := range []ElasticStrategy{RigidMin, RigidMax, Moldable} {
		if got[Elastic].Utilization <= got[s].Utilization {
			t.Errorf("elastic %+v does not beat %s %+v on utilisation", got[Elastic], s, got[s])
		}
	}
	round := func(m ElasticMetrics) [6]float64 {
		return [6]float64{math.Round(m.TotalTime), math.Round(1000 * m.Utilization), math.Round(m.WeightedMeanResponse),
			math.Round(m.WeightedMeanCompletion), math.Round(m.Makespan), math.Round(m.OverallResponse)}
	}
	want := map[ElasticStrategy][6]float64{
		RigidMin: {2876, 515, 51, 587, 2876, 62},
		RigidMax: {4984, 564, 437, 702, 4984, 558},
		Moldable: {3005, 801, 183, 583, 3005, 219},
		Elastic:  {3376, 871, 375, 721, 3376, 614},
	}
	for s, w := range want {
		if g := round(got[s]); g != w {
			t.Errorf("%s: total, utilisation ‰, weighted response, weighted completion, makespan, response = %v, want %v", s, g, w)
		}
	}
}

// Over many job sets, gaps and strategies: every job runs once within its bounds, the slots in
// use never exceed the cluster, rigid and moldable jobs are never rescaled, and a run repeats
// to the bit.
func TestSimulateElasticInvariants(t *testing.T) {
	m := DefaultElasticModel()
	for seed := range uint64(8) {
		for _, gap := range []time.Duration{0, 45 * time.Second, 200 * time.Second} {
			jobs, err := GenerateElastic(&m, 25, seed, gap)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ElasticStrategies {
				o := ElasticOptions{Model: m, Slots: 64, RescaleGap: time.Duration(seed) * 20 * time.Second}
				r, err := SimulateElastic(jobs, s, o)
				if err != nil {
					t.Fatal(err)
				}
				again, _ := SimulateElastic(jobs, s, o)
				if !cmp.Equal(r, again) {
					t.Errorf("seed %d gap %v %s: two runs differ", seed, gap, s)
				}
				for i, j := range r.Jobs {
					lo, hi, _ := s.bounds(&jobs[i], 64)
					if j.Start < j.Submit || j.End <= j.Start || j.Replicas < lo || j.Replicas > hi {
						t.Errorf("seed %d gap %v %s: job %+v outside submit/bounds %d–%d", seed, gap, s, j, lo, hi)
					}
					if s != Elastic && j.Shrinks+j.Expands > 0 {
						t.Errorf("seed %d gap %v %s: job %s rescaled", seed, gap, s, j.Name)
					}
				}
				for _, u := range r.Usage {
					if u.Used < 0 || u.Used > 63 {
						t.Errorf("seed %d gap %v %s: %d slots in use at %v", seed, gap, s, u.Used, u.At)
					}
				}
				if last := r.Usage[len(r.Usage)-1]; last.Used != 0 || r.Metrics.Utilization <= 0 || r.Metrics.Utilization > 1 {
					t.Errorf("seed %d gap %v %s: ends with %d slots in use, utilisation %v", seed, gap, s, last.Used, r.Metrics.Utilization)
				}
			}
		}
	}
}

func TestSimulateElasticRefuses(t *testing.T) {
	m := oneType()
	ok := ElasticJob{Name: "a", Type: "t", Priority: 1, Min: 2, Max: 8, Timesteps: 10}
	for _, tc := range []struct {
		jobs  []ElasticJob
		s     ElasticStrategy
		slots int
		want  string
	}{
		{[]ElasticJob{ok}, Elastic, 1, "want at least 2"},
		{[]ElasticJob{{Name: "big", Type: "t", Priority: 1, Min: 9, Max: 9, Timesteps: 1}}, Elastic, 9, "job big needs 9 replicas and a launcher"},
		{[]ElasticJob{{Name: "x", Type: "nope", Priority: 1, Min: 1, Max: 1, Timesteps: 1}}, Elastic, 9, `job x: type "nope"`},
		{[]ElasticJob{{Name: "late", Arrival: time.Second, Type: "t", Priority: 1, Min: 2, Max: 2, Timesteps: 1}, ok}, Elastic, 9, "order jobs by arrival"},
		{[]ElasticJob{ok}, "greedy", 9, `unknown elastic strategy "greedy"`},
	} {
		if _, err := SimulateElastic(tc.jobs, tc.s, ElasticOptions{Model: m, Slots: tc.slots}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.jobs, err, tc.want)
		}
	}
}

// The default model is the paper's authors' measurements: the curves pass through every
// measured point, interpolate linearly between them and keep the nearest one's value outside;
// the restart cost is the least-squares line through the measured connect times; a rescale of
// a large or xlarge job costs more on more replicas, as the paper's Figure 5 shows.
func TestDefaultElasticModel(t *testing.T) {
	m := DefaultElasticModel()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	measured := map[string][][2]float64{
		"small":  {{2, 0.000996}, {4, 0.000675}, {8, 0.000627}},
		"medium": {{4, 0.00328}, {8, 0.0021}, {16, 0.0023}},
		"large":  {{8, 0.0325}, {16, 0.0275}, {32, 0.016}},
		"xlarge": {{16, 0.11}, {32, 0.064}, {59, 0.035}},
	}
	for name, pts := range measured {
		typ, err := m.Type(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			if got := typ.StepTime(int(p[0])); !near(got, p[1]) {
				t.Errorf("%s on %v replicas: %v s a step, measured %v", name, p[0], got, p[1])
			}
		}
	}
	xl, _ := m.Type("xlarge")
	if got, want := xl.StepTime(24), (0.11+0.064)/2; !near(got, want) {
		t.Errorf("xlarge on 24 replicas: %v s, want %v (halfway between 16 and 32)", got, want)
	}
	if got := xl.StepTime(63); !near(got, 0.035) {
		t.Errorf("xlarge on 63 replicas: %v s, want 0.035 (59's, the last measured)", got)
	}
	if got := xl.Speedup(59); !near(got, 0.11/0.035) {
		t.Errorf("xlarge speed-up on 59: %v", got)
	}
	// The restart line is the least-squares fit of the measured connect times.
	xs := []float64{2, 4, 8, 16, 32, 59}
	ys := []float64{1.248, 1.492, 3.902, 5.035, 6.949, 12.25}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i]/6, my+ys[i]/6
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if slope := sxy / sxx; !near(m.RestartPerReplica, slope) || !near(m.RestartBase, my-slope*mx) {
		t.Errorf("restart %v s + %v s per replica, want the fit %v + %v", m.RestartBase, m.RestartPerReplica, my-slope*mx, slope)
	}
	// A rescale costs the connect time and the load balancing on the replicas before it, as the
	// authors' simulator charges them: more on more replicas (Figure 5).
	lg, _ := m.Type("large")
	if a, b := m.Rescale(lg, 8), m.Rescale(lg, 32); !(a < b) || !near(b, m.RestartBase+32*m.RestartPerReplica+25.083405) {
		t.Errorf("large: %v s rescaling from 8, %v s from 32", a, b)
	}
	// A start costs the connect time too: a small job alone on its minimum ends after the
	// connect and 40,000 steps of 0.996 ms; its response is 0.
	r, err := SimulateElastic([]ElasticJob{{Name: "s", Type: "small", Priority: 1, Min: 2, Max: 8, Timesteps: 40_000}}, RigidMin, ElasticOptions{Model: m, Slots: 64})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Jobs[0].End, m.Connect(2)+40_000*0.000996; r.Jobs[0].Start != 0 || !near(got, want) {
		t.Errorf("small alone: %+v, want end %v", r.Jobs[0], want)
	}
	if one := oneType(); one.StartDelay(4) != 0 {
		t.Errorf("a model without ConnectAtStart delays a start by %v s", one.StartDelay(4))
	}
	bad := m
	bad.Types = []ElasticType{{Name: "x", Min: 3, Max: 2, Timesteps: 1, Steps: []ScalePoint{{1, 1}}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "type x: replicas 3 to 2") {
		t.Errorf("bad bounds: %v", err)
	}
	bad.Types = []ElasticType{{Name: "x", Min: 2, Max: 4, Timesteps: 1, Steps: []ScalePoint{{4, 1}, {2, 1}}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "type x: step times: replica count 2 at point 2") {
		t.Errorf("counts out of order: %v", err)
	}
	bad.Types = []ElasticType{{Name: "x", Min: 2, Max: 4, Timesteps: 1}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "type x: no measured step times") {
		t.Errorf("no steps: %v", err)
	}
	bad.Types = []ElasticType{{Name: "x", Min: 2, Max: 4, Timesteps: 1, Steps: []ScalePoint{{2, 1}}, Balance: []ScalePoint{{2, -1}}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "type x: load balancing: -1 s on 2 replicas") {
		t.Errorf("negative balance: %v", err)
	}
}

func TestGenerateElastic(t *testing.T) {
	m := DefaultElasticModel()
	a, err := GenerateElastic(&m, 200, 7, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateElastic(&m, 200, 7, 30*time.Second)
	if !cmp.Equal(a, b) {
		t.Error("the same seed gave two job sets")
	}
	types, prios := map[string]int{}, map[int32]int{}
	for i, j := range a {
		typ, err := m.Type(j.Type)
		if err != nil || j.Arrival != time.Duration(i)*30*time.Second || j.Min != typ.Min || j.Max != typ.Max || j.Timesteps != typ.Timesteps {
			t.Errorf("job %d: %+v", i, j)
		}
		types[j.Type]++
		prios[j.Priority]++
	}
	if len(types) != 4 || len(prios) != 5 || prios[0] != 0 || prios[6] != 0 {
		t.Errorf("types %v, priorities %v", types, prios)
	}
	if _, err := GenerateElastic(&m, 0, 1, 0); err == nil {
		t.Error("0 jobs: no error")
	}
	// By type, as the paper's authors' simulator draws them: small 4–5 … xlarge 1–2.
	m.PriorityByType = true
	c, err := GenerateElastic(&m, 200, 7, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int32{"small": {4, 5}, "medium": {3, 4}, "large": {2, 3}, "xlarge": {1, 2}}
	seen := map[string]map[int32]bool{}
	for _, j := range c {
		if r := want[j.Type]; j.Priority != r[0] && j.Priority != r[1] {
			t.Errorf("by type: %s has priority %d, want %v", j.Name, j.Priority, r)
		}
		if seen[j.Type] == nil {
			seen[j.Type] = map[int32]bool{}
		}
		seen[j.Type][j.Priority] = true
	}
	for typ, ps := range seen {
		if len(ps) != 2 {
			t.Errorf("by type: %s drew only %v", typ, ps)
		}
	}
	m.Types = append(m.Types, ElasticType{Name: "huge", Min: 1, Max: 1, Timesteps: 1, Steps: []ScalePoint{{1, 1}}})
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "priorities by type for 5 types") {
		t.Errorf("by type with 5 types: %v", err)
	}
}

func TestElasticTraceRoundTrip(t *testing.T) {
	m := DefaultElasticModel()
	jobs, _ := GenerateElastic(&m, 12, 3, 45*time.Second)
	out, err := EncodeElasticTrace(jobs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeElasticTrace(out, "round", &m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	in := `jobs:
- {name: b, arrival: 60, type: xlarge, priority: 2}
- {name: a, arrival: 1m, type: small, priority: 5, elastic: {minReplicas: 3, maxReplicas: 6}, timesteps: 100}
`
	got, err := DecodeElasticTrace([]byte(in), "in", &m)
	if err != nil {
		t.Fatal(err)
	}
	want := []ElasticJob{
		{Name: "b", Arrival: time.Minute, Type: "xlarge", Priority: 2, Min: 16, Max: 64, Timesteps: 10_000},
		{Name: "a", Arrival: time.Minute, Type: "small", Priority: 5, Min: 3, Max: 6, Timesteps: 100},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestDecodeElasticTraceErrors(t *testing.T) {
	m := DefaultElasticModel()
	for _, tc := range []struct{ in, want string }{
		{``, "empty"},
		{`jobs: []`, "0 jobs"},
		{`jobs: [{type: small, priority: 1}]`, "job job-1 (jobs[0]): arrival is required"},
		{`jobs: [{arrival: 0, type: huge, priority: 1}]`, `type "huge": want one of`},
		{`jobs: [{arrival: 0, type: small, priority: 0}]`, "priority 0; want 1 to 5"},
		{`jobs: [{arrival: 0, type: small, priority: 1, elastic: {minReplicas: 4, maxReplicas: 2}}]`, "minReplicas 4, maxReplicas 2"},
		{`jobs: [{arrival: 0, type: small, priority: 1, timesteps: -1}]`, "timesteps -1"},
		{`jobs: [{arrival: 0, type: small, priority: 1, replicas: 3}]`, `unknown field "jobs[0].replicas"`},
		{`jobs: [{arrival: -5, type: small, priority: 1}]`, "must be between 0"},
		{`jobs: [{name: a, arrival: 0, type: small, priority: 1}, {name: a, arrival: 1, type: small, priority: 1}]`, "name already used by jobs[0]"},
	} {
		if _, err := DecodeElasticTrace([]byte(tc.in), "t.yaml", &m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
}

func FuzzDecodeElasticTrace(f *testing.F) {
	f.Add([]byte(`jobs: [{name: a, arrival: 0, type: small, priority: 1, elastic: {minReplicas: 2, maxReplicas: 8}}]`))
	f.Add([]byte(`{"jobs": [{"arrival": "1m", "type": "xlarge", "priority": 5, "timesteps": 3}]}`))
	m := DefaultElasticModel()
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := DecodeElasticTrace(data, "fuzz", &m)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.Min < 1 || j.Max < j.Min || j.Timesteps < 1 || j.Priority < ElasticMinPriority || j.Priority > ElasticMaxPriority {
				t.Fatalf("accepted %+v", j)
			}
		}
		out, err := EncodeElasticTrace(jobs)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeElasticTrace(out, "again", &m); err != nil || !cmp.Equal(jobs, back) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// BenchmarkElastic is the simulator's speed target on the elastic experiment: 10,000 jobs on
// 1,000 nodes of 16 slots, submitted 0.36 s apart (the paper's 90 s on 64 slots, scaled to
// 16,000), every strategy; the target is 10 s of CPU per run (cpu-s/op, user and system time
// of the whole process, so a busy machine's other work does not count).
func BenchmarkElastic(b *testing.B) {
	m := DefaultElasticModel()
	jobs, err := GenerateElastic(&m, 10_000, 4, 360*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range ElasticStrategies {
		b.Run(string(s), func(b *testing.B) {
			cpu := cpuSeconds(b)
			for b.Loop() {
				if _, err := SimulateElastic(jobs, s, ElasticOptions{Model: m, Slots: 16_000, RescaleGap: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds(b)-cpu)/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
