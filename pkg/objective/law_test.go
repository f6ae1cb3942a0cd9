package objective

import (
	"math"
	"slices"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

const (
	mi = 1 << 20
	gi = 1 << 30
)

// web is a p99-latency objective of 20 ms with the default margin (20 %), window and memory.
var web = Policy{
	Target: 0.020, ShrinkMargin: 0.2, Window: DefaultWindow, Recall: DefaultRecall,
	Bounds: Bounds{
		Min: Size{Replicas: 1, CPUMilli: 500, MemoryBytes: 256 * mi, IOBytesPerSecond: 5_000_000},
		Max: Size{Replicas: 6, CPUMilli: 4000, MemoryBytes: 4 * gi, IOBytesPerSecond: 100_000_000},
	},
}

// full is a window of samples at the target, so that a shrink is not held for settling.
var full = History{Samples: []float64{0.020, 0.020}}

func TestStart(t *testing.T) {
	tests := []struct {
		name string
		b    Bounds
		want Size
	}{
		{"thesis size", web.Bounds, Size{1, 1000, 1 * gi, 10_000_000}},
		{"within smaller maxima", Bounds{Min: Size{2, 100, mi, 1000}, Max: Size{4, 500, 512 * mi, 1_000_000}}, Size{2, 500, 512 * mi, 1_000_000}},
		{"within larger minima", Bounds{Min: Size{1, 2000, 2 * gi, 50_000_000}, Max: Size{4, 4000, 4 * gi, 100_000_000}}, Size{1, 2000, 2 * gi, 50_000_000}},
	}
	for _, tc := range tests {
		if got := Start(tc.b); got != tc.want {
			t.Errorf("%s: Start = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	start := Size{1, 1000, 1 * gi, 10_000_000}
	atPodMax := Size{2, 4000, 4 * gi, 40_000_000}
	throughput := web
	throughput.Target, throughput.AtLeast = 2000, true
	tests := []struct {
		name    string
		p       Policy
		h       History
		in      Input
		want    Decision
		wantCap int64 // checked when not 0
	}{
		{"violated grows in place by the shortfall", web, History{}, Input{Current: start, Measured: 0.030},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{1, 1500, 1536 * mi, 15_000_000}, Smoothed: 0.030, Pressure: 1.5}, 0},
		{"the shortfall is smoothed over the window", web, History{Samples: []float64{0.020, 0.022}}, Input{Current: start, Measured: 0.032},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{1, 1234, 1264 * mi, 12_340_000}, Smoothed: 0.02466666, Pressure: 1.2333333}, 0},
		{"pods at their CPU bound grow by replicas", web, History{}, Input{Current: atPodMax, Measured: 0.025},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{3, 4000, 4 * gi, 40_000_000}, Smoothed: 0.025, Pressure: 1.25}, 0},
		{"in place first, replicas for the rest", web, History{}, Input{Current: Size{2, 3000, 3 * gi, 30_000_000}, Measured: 0.040},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{3, 4000, 4 * gi, 40_000_000}, Smoothed: 0.040, Pressure: 2}, 0},
		{"full nodes grow by replicas", web, History{}, Input{Current: start, Measured: 0.030, InPlaceBlocked: true},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{2, 1000, 1 * gi, 10_000_000}, Smoothed: 0.030, Pressure: 1.5}, 0},
		{"growth is bounded per period", web, History{}, Input{Current: start, Measured: 1},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{1, 4000, 4 * gi, 40_000_000}, Smoothed: 1, Pressure: 50}, 0},
		{"at every maximum it holds", web, History{}, Input{Current: Size{6, 4000, 4 * gi, 40_000_000}, Measured: 0.030},
			Decision{Action: Hold, Reason: ReasonAtMaximum, Size: Size{6, 4000, 4 * gi, 40_000_000}, Smoothed: 0.030, Pressure: 1.5}, 0},
		{"within the margin it holds", web, full, Input{Current: start, Measured: 0.017},
			Decision{Action: Hold, Reason: ReasonWithinMargin, Size: start, Smoothed: 0.019, Pressure: 0.95}, 0},
		{"at the target it holds", web, History{}, Input{Current: start, Measured: 0.020},
			Decision{Action: Hold, Reason: ReasonWithinMargin, Size: start, Smoothed: 0.020, Pressure: 1}, 0},
		{"over-performing without a full window it settles", web, History{Samples: []float64{0.010}}, Input{Current: start, Measured: 0.010},
			Decision{Action: Hold, Reason: ReasonSettling, Size: start, Smoothed: 0.010, Pressure: 0.5}, 0},
		{"over-performing shrinks replicas first", web, History{Samples: []float64{0.012, 0.012}}, Input{Current: Size{3, 2000, 2 * gi, 20_000_000}, Measured: 0.012},
			// capacity 6000m × 0.6/0.9 = 4000m: two pods of 2000m.
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{2, 2000, 2 * gi, 20_000_000}, Smoothed: 0.012, Pressure: 0.6}, 0},
		{"then in place", web, History{Samples: []float64{0.012, 0.012}}, Input{Current: Size{1, 3000, 3 * gi, 30_000_000}, Measured: 0.012},
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{1, 2000, 2 * gi, 20_000_000}, Smoothed: 0.012, Pressure: 0.6}, 0},
		{"a shrink at most halves", web, History{Samples: []float64{0.001, 0.001}}, Input{Current: Size{1, 4000, 4 * gi, 40_000_000}, Measured: 0.001},
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{1, 2000, 2 * gi, 20_000_000}, Smoothed: 0.001, Pressure: 0.05}, 0},
		{"at every minimum it holds", web, History{Samples: []float64{0.001, 0.001}}, Input{Current: web.Bounds.Min, Measured: 0.001},
			Decision{Action: Hold, Reason: ReasonAtMinimum, Size: web.Bounds.Min, Smoothed: 0.001, Pressure: 0.05}, 0},
		{"a recent violation keeps the capacity it asked for", web, History{Samples: []float64{0.010, 0.010}, NeededCapacity: 2501, ViolatedAge: 5}, Input{Current: Size{1, 4000, 4 * gi, 40_000_000}, Measured: 0.010},
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{1, 2501, 2562 * mi, 25_010_000}, Smoothed: 0.010, Pressure: 0.5}, 0},
		{"a violation that asked for this capacity holds it", web, History{Samples: []float64{0.010, 0.010}, NeededCapacity: 1000, ViolatedAge: 5}, Input{Current: start, Measured: 0.010},
			Decision{Action: Hold, Reason: ReasonRecentViolation, Size: start, Smoothed: 0.010, Pressure: 0.5}, 0},
		{"a violation is forgotten after the recall", web, History{Samples: []float64{0.010, 0.010}, NeededCapacity: 4000, ViolatedAge: DefaultRecall}, Input{Current: Size{1, 4000, 4 * gi, 40_000_000}, Measured: 0.010},
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{1, 2223, 2277 * mi, 22_230_000}, Smoothed: 0.010, Pressure: 0.5}, 0},
		{"throughput short of an AtLeast target grows", throughput, History{}, Input{Current: start, Measured: 1600},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{1, 1250, 1280 * mi, 12_500_000}, Smoothed: 1600, Pressure: 1.25}, 0},
		{"no throughput at all grows at the bounded rate", throughput, History{}, Input{Current: start, Measured: 0},
			Decision{Action: Grow, Reason: ReasonViolated, Size: Size{1, 4000, 4 * gi, 40_000_000}, Smoothed: 0, Pressure: math.Inf(1)}, 0},
		{"throughput beyond the margin shrinks", throughput, History{Samples: []float64{4000, 4000}}, Input{Current: Size{1, 2000, 2 * gi, 20_000_000}, Measured: 4000},
			Decision{Action: Shrink, Reason: ReasonOverPerforming, Size: Size{1, 1112, 1139 * mi, 11_120_000}, Smoothed: 4000, Pressure: 0.5}, 0},
		{"no measurement holds", web, full, Input{Current: start, Measured: math.NaN()},
			Decision{Action: Hold, Reason: ReasonNoMeasurement, Size: start, Smoothed: math.NaN(), Pressure: math.NaN()}, 0},
		{"a negative measurement is none", web, full, Input{Current: start, Measured: -1},
			Decision{Action: Hold, Reason: ReasonNoMeasurement, Size: start, Smoothed: math.NaN(), Pressure: math.NaN()}, 0},
		{"a size beyond new bounds is brought within", web, History{}, Input{Current: Size{8, 6000, 8 * gi, 40_000_000}, Measured: 0.030},
			Decision{Action: Shrink, Reason: ReasonOutOfBounds, Size: Size{6, 4000, 4 * gi, 40_000_000}, Smoothed: math.NaN(), Pressure: math.NaN()}, 0},
	}
	approx := cmp.Comparer(func(a, b float64) bool {
		return a == b || (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) < 1e-6
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Decide(tc.p, tc.h, tc.in)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	start := Start(web.Bounds)
	// Samples accumulate up to the window, oldest dropped.
	var h History
	for _, m := range []float64{0.018, 0.019, 0.017, 0.016} {
		_, h = Decide(web, h, Input{Current: start, Measured: m})
	}
	if diff := cmp.Diff([]float64{0.019, 0.017, 0.016}, h.Samples); diff != "" {
		t.Errorf("window (-want +got):\n%s", diff)
	}
	// A change of size starts a new window; a violation remembers the capacity it asked for.
	d, h := Decide(web, h, Input{Current: start, Measured: 0.050}) // smoothed 0.0277: asks for 1384m
	if d.Action != Grow || len(h.Samples) != 0 || h.NeededCapacity != 1384 || h.ViolatedAge != 0 {
		t.Errorf("after a growth: %+v, history %+v", d, h)
	}
	// A hold keeps counting the violation's age; the decision's input history is not changed.
	before := History{Samples: []float64{0.019}, NeededCapacity: 1000, ViolatedAge: 3}
	_, after := Decide(web, before, Input{Current: d.Size, Measured: 0.019})
	if after.ViolatedAge != 4 || len(before.Samples) != 1 || before.Samples[0] != 0.019 {
		t.Errorf("before %+v after %+v", before, after)
	}
	// A measurement that fails keeps the window.
	_, kept := Decide(web, after, Input{Current: d.Size, Measured: math.NaN()})
	if diff := cmp.Diff(after.Samples, kept.Samples); diff != "" {
		t.Errorf("window after a failed measurement (-want +got):\n%s", diff)
	}
}

// A service that does not answer its metric endpoint in time grows by the most a period allows,
// is recalled as a violation, and holds at its maximum.
func TestUnresponsiveGrows(t *testing.T) {
	cur := Size{1, 500, 512 * mi, 5_000_000}
	h0 := History{Samples: []float64{0.030}, ViolatedAge: 3}
	d, h := Decide(web, h0, Input{Current: cur, Measured: math.NaN(), Unresponsive: true})
	// 500m × 4 = 2000m in place; memory and I/O by the same factor.
	if d.Action != Grow || d.Reason != ReasonUnresponsive || d.Size != (Size{1, 2000, 2 * gi, 20_000_000}) || d.Met() || !math.IsNaN(d.Smoothed) {
		t.Errorf("unresponsive: %+v, want Grow Unresponsive to 1 × 2000m, not met, no smoothed value", d)
	}
	if h.ViolatedAge != 0 || h.NeededCapacity != 2000 || len(h.Samples) != 0 {
		t.Errorf("history %+v, want the violation recalled at 2000m and the window restarted by the growth", h)
	}
	// At the pods' and the replicas' maximum it holds; the measurement it could not read never
	// joins the window.
	top := web.Bounds.Max
	d, h = Decide(web, h0, Input{Current: top, Unresponsive: true})
	if d.Action != Hold || d.Reason != ReasonAtMaximum || !slices.Equal(h.Samples, h0.Samples) {
		t.Errorf("unresponsive at the maximum: %+v, samples %v; want Hold AtMaximum, samples kept", d, h.Samples)
	}
	// A probe that ends unresponsive failed: the recall doubles.
	if _, h = Decide(web, History{Probe: true, Recall: DefaultRecall}, Input{Current: cur, Unresponsive: true}); h.Recall != 2*DefaultRecall {
		t.Errorf("recall after an unresponsive probe %d, want %d", h.Recall, 2*DefaultRecall)
	}
}

func TestProbeRecall(t *testing.T) {
	big := Size{2, 2000, 2 * gi, 20_000_000}
	// A shrink with no violation recalled is a probe.
	d, h := Decide(web, History{Samples: []float64{0.010, 0.010}}, Input{Current: big, Measured: 0.010})
	if d.Action != Shrink || !h.Probe || h.Recall != DefaultRecall {
		t.Fatalf("first shrink %+v, history %+v: want a probe", d, h)
	}
	// A probe that ends in a violation doubles the recall.
	_, failed := Decide(web, h, Input{Current: d.Size, Measured: 0.030})
	if failed.Probe || failed.Recall != 2*DefaultRecall || failed.NeededCapacity == 0 {
		t.Errorf("after a failed probe: %+v, want the recall doubled", failed)
	}
	// It doubles at most MaxRecallFactor times.
	capped := h
	capped.Recall = MaxRecallFactor * DefaultRecall
	if _, c := Decide(web, capped, Input{Current: d.Size, Measured: 0.030}); c.Recall != MaxRecallFactor*DefaultRecall {
		t.Errorf("recall %d, want at most %d", c.Recall, MaxRecallFactor*DefaultRecall)
	}
	// A probe that holds for a window sets the recall back.
	held := h
	held.Recall = 8 * DefaultRecall
	for range web.Window {
		_, held = Decide(web, held, Input{Current: d.Size, Measured: 0.018})
	}
	if held.Probe || held.Recall != DefaultRecall {
		t.Errorf("after a probe that held: %+v, want the recall back at %d", held, DefaultRecall)
	}
	// A shrink above a recalled violation is no probe.
	_, floored := Decide(web, History{Samples: []float64{0.010, 0.010}, NeededCapacity: 2500}, Input{Current: Size{1, 4000, 4 * gi, 40_000_000}, Measured: 0.010})
	if floored.Probe {
		t.Errorf("a shrink held above a recalled violation is a probe: %+v", floored)
	}
}

func TestPolicyFor(t *testing.T) {
	obj, err := v1alpha1.DecodeServiceObjective([]byte(`apiVersion: finegrain.dev/v1alpha1
kind: ServiceObjective
metadata: {name: rps}
spec:
  targetRef: {kind: StatefulSet, name: db}
  metric: {target: 2k, direction: AtLeast, source: {query: {url: "http://prom:9090", query: "sum(rate(q[1m]))"}}}
  podBounds: {max: {cpu: 1500m, memory: 2Gi, ioBandwidth: 50M}}
  replicas: {min: 2, max: 5}
  shrinkMarginPercent: 30
`), "rps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		Target: 2000, AtLeast: true, ShrinkMargin: 0.3, Window: DefaultWindow, Recall: DefaultRecall,
		Bounds: Bounds{
			Min: Size{2, 1000, 1 * gi, 10_000_000},
			Max: Size{5, 1500, 2 * gi, 50_000_000},
		},
	}
	if diff := cmp.Diff(want, PolicyFor(&obj.Spec)); diff != "" {
		t.Errorf("PolicyFor (-want +got):\n%s", diff)
	}
	if got := Start(want.Bounds); got != (Size{2, 1000, 1 * gi, 10_000_000}) {
		t.Errorf("Start = %v", got)
	}
	// The scale-down stabilisation is counted in whole periods, rounded up; its default is
	// DefaultRecall periods whatever the period.
	for _, tc := range []struct {
		fields string
		recall int
	}{
		{"periodSeconds: 10\n  scaleDownStabilizationSeconds: 60", 6},
		{"periodSeconds: 10\n  scaleDownStabilizationSeconds: 45", 5},
		{"periodSeconds: 30\n  scaleDownStabilizationSeconds: 1", 1},
		{"periodSeconds: 2", DefaultRecall},
	} {
		obj, err := v1alpha1.DecodeServiceObjective([]byte(`apiVersion: finegrain.dev/v1alpha1
kind: ServiceObjective
metadata: {name: web}
spec:
  targetRef: {kind: Deployment, name: web}
  metric: {target: 20m, direction: AtMost, source: {pods: {port: 8080, metric: p99}}}
  podBounds: {max: {cpu: "2", memory: 1Gi, ioBandwidth: 50M}}
  replicas: {max: 3}
  `+tc.fields+"\n"), "web.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.fields, err)
		}
		if got := PolicyFor(&obj.Spec).Recall; got != tc.recall {
			t.Errorf("%q: recall %d periods, want %d", tc.fields, got, tc.recall)
		}
	}
}

// TestScaleDownStabilization follows a service through a violation and the over-performance
// after it: no shrink below the capacity the violation asked for while it is recalled, the
// shrink in the period after, and the same history kept under a shorter stabilisation (an
// objective edited) recalled for the new one.
func TestScaleDownStabilization(t *testing.T) {
	p := web
	p.Recall = 6
	// A violation asks for 2 × 1500m = 3000m (pressure 1.5 on 2 × 1000m).
	d, h := Decide(p, History{}, Input{Current: Size{2, 1000, 1 * gi, 10_000_000}, Measured: 0.030})
	if d.Action != Grow || h.NeededCapacity != 3000 {
		t.Fatalf("violation: %+v %+v", d, h)
	}
	// Then the load falls: a third of the target, far beyond the margin.
	cur := d.Size
	var shrunkAt int
	for period := 1; period <= 10 && shrunkAt == 0; period++ {
		d, h = Decide(p, h, Input{Current: cur, Measured: 0.006})
		switch {
		case d.Action == Shrink:
			shrunkAt = period
		case period >= p.Window && d.Reason != ReasonRecentViolation:
			t.Errorf("period %d: %s %s, want Hold RecentViolation", period, d.Action, d.Reason)
		}
	}
	if shrunkAt != p.Recall+1 {
		t.Errorf("first shrink %d periods after the violation, want %d (recall %d)", shrunkAt, p.Recall+1, p.Recall)
	}
	// 3000m × 0.3/0.9 = 1000m, at most halved: 1500m.
	if d.Size.Capacity() != 1500 {
		t.Errorf("shrink to %v, want 1500m of capacity", d.Size)
	}
	// A history whose recall was doubled under a longer stabilisation is recalled for this one.
	old := History{Samples: []float64{0.006, 0.006}, NeededCapacity: 3000, ViolatedAge: 7, Recall: 64 * DefaultRecall}
	if d, next := Decide(p, old, Input{Current: cur, Measured: 0.006}); d.Action != Shrink || next.Recall != p.Recall {
		t.Errorf("history of another stabilisation: %+v, recall %d, want a shrink and recall %d", d, next.Recall, p.Recall)
	}
}

// Violated judges one raw measurement against the target in the metric's direction; what could
// not be read is not a violation.
func TestViolated(t *testing.T) {
	throughput := web
	throughput.Target, throughput.AtLeast = 100, true
	for _, tc := range []struct {
		p    Policy
		m    float64
		want bool
	}{
		{web, 0.021, true}, {web, 0.020, false}, {web, 0.001, false}, {web, math.NaN(), false},
		{throughput, 99, true}, {throughput, 0, true}, {throughput, 100, false}, {throughput, math.NaN(), false},
	} {
		if got := tc.p.Violated(tc.m); got != tc.want {
			t.Errorf("target %v (at least %v), measured %v: violated %v, want %v", tc.p.Target, tc.p.AtLeast, tc.m, got, tc.want)
		}
	}
}
