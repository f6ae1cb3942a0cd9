// Package objective is the control law of finegrain's service objectives (Genisys's feedback
// loop): from the measurements of a service's metric, its target, its bounds and its current
// size it decides the next size — CPU, memory and I/O bandwidth per pod, then the number of pods.
// It is pure: it reads no metric, talks to no API server and resizes nothing; the loop that does
// keeps the History this package returns and hands it back on the next period.
//
// The law, once per period (docs/objectives.md):
//
//  1. The measurement joins a window of at most Policy.Window samples taken since the size last
//     changed; the smoothed value is their mean.
//  2. The pressure is smoothed/target for an AtMost metric (a latency) and target/smoothed for an
//     AtLeast metric (a throughput): above 1 the objective is violated.
//  3. Violated: the capacity (replicas × CPU per pod) grows by the pressure, at most
//     MaxGrowthPerPeriod-fold — first in place, the pods' CPU, memory and I/O bandwidth scaled
//     together up to their maxima, then by replicas once the pods are at their CPU maximum or
//     the caller says their nodes have no room.
//  4. Over-performing by more than Policy.ShrinkMargin, for a whole window since the last
//     change: the capacity shrinks to where the metric is predicted at half the margin from
//     the target, at most halving per period, replicas first, then in place — never below the
//     capacity a recent violation asked for. A violation is recalled for Policy.Recall periods;
//     a shrink once it is forgotten is a probe: when a probe ends in a violation within a
//     window (the load had not fallen: the sizes that meet the target and those that beat it
//     by the margin lie between two steps of the size), the recall doubles, up to
//     MaxRecallFactor times, so such probes grow rarer instead of oscillating; a probe that
//     holds for a window sets it back.
//  5. Otherwise, between the target and the margin, the size holds (hysteresis).
//
// A service that did not answer its metric endpoint in time (Input.Unresponsive) is violated
// beyond any measurement: it grows MaxGrowthPerPeriod-fold, as a throughput of 0 would.
//
// What always holds: every size returned lies within the bounds; a steady metric never draws
// both a growth and a shrink; a larger shortfall never yields a smaller capacity or fewer
// replicas.
package objective

import (
	"fmt"
	"math"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Size is what a service is granted: Replicas pods of CPUMilli millicores, MemoryBytes of memory
// and IOBytesPerSecond of I/O bandwidth each.
type Size struct {
	Replicas         int32
	CPUMilli         int64
	MemoryBytes      int64
	IOBytesPerSecond int64
}

// Capacity is the service's CPU in millicores: replicas × CPU per pod.
func (s Size) Capacity() int64 { return int64(s.Replicas) * s.CPUMilli }

func (s Size) String() string {
	return fmt.Sprintf("%d × (%dm CPU, %d MiB, %d kB/s I/O)", s.Replicas, s.CPUMilli, s.MemoryBytes>>20, s.IOBytesPerSecond/1000)
}

// Bounds are the smallest and largest sizes, field by field.
type Bounds struct{ Min, Max Size }

// Law defaults.
const (
	// DefaultWindow is how many samples are smoothed: 3, 30 s at the default period.
	DefaultWindow = 3
	// DefaultRecall is how many periods a violation keeps shrinks above the capacity it asked
	// for when the objective does not say (scaleDownStabilizationSeconds): 30, five minutes at
	// the default period.
	DefaultRecall = v1alpha1.DefaultRecallPeriods
	// MaxRecallFactor bounds the doubling of the recall after failed shrinks.
	MaxRecallFactor = 64
	// MaxGrowthPerPeriod bounds one growth, however large the shortfall (a throughput of 0 is an
	// infinite shortfall).
	MaxGrowthPerPeriod = 4
	// minShrinkFactor bounds one shrink: the capacity at most halves per period.
	minShrinkFactor = 0.5
)

// Policy is one objective's law.
type Policy struct {
	Target float64
	// AtLeast is true for a metric that must stay at or above Target, false for one that must
	// stay at or below it.
	AtLeast bool
	// ShrinkMargin is the fraction (0 to 1) by which the metric must beat the target before
	// the service shrinks.
	ShrinkMargin float64
	// Bounds must be as PolicyFor makes them from a valid spec: every minimum positive and at
	// most its maximum.
	Bounds Bounds
	// Window is how many samples since the last change are smoothed, at least 1 (DefaultWindow).
	Window int
	// Recall is how many periods a violation is recalled, at least 1 (DefaultRecall).
	Recall int
}

// PolicyFor is the law of a defaulted, valid objective spec.
func PolicyFor(spec *v1alpha1.ServiceObjectiveSpec) Policy {
	b := &spec.PodBounds
	return Policy{
		Target:       spec.Metric.Target.AsApproximateFloat64(),
		AtLeast:      spec.Metric.Direction == v1alpha1.AtLeast,
		ShrinkMargin: float64(spec.ShrinkMarginPercent) / 100,
		Bounds: Bounds{
			Min: Size{Replicas: spec.Replicas.Min, CPUMilli: b.Min.CPU.MilliValue(), MemoryBytes: b.Min.Memory.Value(), IOBytesPerSecond: b.Min.IOBandwidth.Value()},
			Max: Size{Replicas: spec.Replicas.Max, CPUMilli: b.Max.CPU.MilliValue(), MemoryBytes: b.Max.Memory.Value(), IOBytesPerSecond: b.Max.IOBandwidth.Value()},
		},
		Window: DefaultWindow,
		Recall: recallPeriods(spec.ScaleDownStabilizationSeconds, spec.PeriodSeconds),
	}
}

// recallPeriods is a scale-down stabilisation in whole periods, rounded up, at least one.
func recallPeriods(seconds, period int32) int {
	return max(1, int((seconds+period-1)/period))
}

// Start is the size of a new service without history: the thesis's one core, 1 GiB and 10 MB/s
// of I/O per pod, within the bounds, and the fewest replicas allowed.
func Start(b Bounds) Size {
	return clampSize(Size{
		Replicas:         b.Min.Replicas,
		CPUMilli:         v1alpha1.DefaultStartCPUMilli,
		MemoryBytes:      v1alpha1.DefaultStartMemoryBytes,
		IOBytesPerSecond: v1alpha1.DefaultStartIOBandwidth,
	}, b)
}

// History is what the law remembers between periods; the zero value is a service without
// history.
type History struct {
	// Samples are the measurements since the size last changed, oldest first, at most
	// Policy.Window of them.
	Samples []float64
	// NeededCapacity is the largest capacity a violation recalled asked for (0: none),
	// ViolatedAge how many periods ago the last violation was.
	NeededCapacity int64
	ViolatedAge    int
	// Recall is how many periods the violation is recalled (0: Policy.Recall).
	Recall int
	// Probe is true from a shrink made with no violation recalled until a window of samples
	// after it.
	Probe bool
}

// Action is what a decision does to the size.
type Action string

// Actions.
const (
	Grow   Action = "Grow"
	Shrink Action = "Shrink"
	Hold   Action = "Hold"
)

// Reasons of decisions, as the objective's status reports them.
const (
	ReasonViolated        = "Violated"
	ReasonOverPerforming  = "OverPerforming"
	ReasonWithinMargin    = "WithinMargin"
	ReasonSettling        = "Settling"
	ReasonAtMaximum       = "AtMaximum"
	ReasonAtMinimum       = "AtMinimum"
	ReasonRecentViolation = "RecentViolation"
	ReasonOutOfBounds     = "OutOfBounds"
	ReasonNoMeasurement   = "NoMeasurement"
	ReasonUnresponsive    = "Unresponsive"
)

// Decision is one period's outcome.
type Decision struct {
	Action Action
	Reason string
	// Size is the size to grant (the current one when Action is Hold).
	Size Size
	// Smoothed is the windowed mean the decision used and Pressure its ratio to the target (above
	// 1: violated); both NaN without a measurement.
	Smoothed, Pressure float64
}

// Met says whether the objective was met at the decision (false without a measurement).
func (d Decision) Met() bool { return d.Pressure <= 1 }

// Input is one period's observation.
type Input struct {
	// Current is the size the service has now.
	Current Size
	// Measured is the metric's value this period; NaN (or a negative or infinite value) when it
	// could not be read.
	Measured float64
	// InPlaceBlocked says the pods' nodes have no room to grow them in place, so a growth must
	// add replicas.
	InPlaceBlocked bool
	// Unresponsive says the metric could not be read because the service did not answer in time
	// (its pods' metric endpoints timed out): a violation beyond any value it could have
	// reported, so the service grows by MaxGrowthPerPeriod; Measured is ignored.
	Unresponsive bool
}

// Decide applies the law for one period and returns the decision and the history to pass to the
// next period.
func Decide(p Policy, h History, in Input) (Decision, History) {
	next := h
	next.ViolatedAge++
	if next.Recall < p.Recall || next.Recall > MaxRecallFactor*p.Recall {
		// No history yet, or one kept under another scale-down stabilisation.
		next.Recall = p.Recall
	}
	if next.ViolatedAge > next.Recall {
		next.NeededCapacity = 0
	}
	cur := in.Current
	d := Decision{Action: Hold, Size: cur, Smoothed: math.NaN(), Pressure: math.NaN()}

	// 0. A size outside the bounds (the bounds changed) is brought within them first.
	if c := clampSize(cur, p.Bounds); c != cur {
		d.Size, d.Reason, d.Action = c, ReasonOutOfBounds, Shrink
		if c.Capacity() > cur.Capacity() {
			d.Action = Grow
		}
		next.Samples = nil
		return d, next
	}
	switch m := in.Measured; {
	case in.Unresponsive:
		// A service too loaded to answer: an infinite pressure; the window keeps its samples.
		d.Pressure = math.Inf(1)
	case math.IsNaN(m) || math.IsInf(m, 0) || m < 0:
		d.Reason = ReasonNoMeasurement
		return d, next
	default:
		// 1. Smooth over the window of samples since the last change.
		next.Samples = appendWindow(h.Samples, m, p.Window)
		d.Smoothed = mean(next.Samples)
		// 2. Pressure.
		d.Pressure = pressure(p, d.Smoothed)
	}
	// The outcome of a probe.
	switch {
	case h.Probe && d.Pressure > 1:
		next.Recall, next.Probe = min(2*next.Recall, MaxRecallFactor*p.Recall), false
	case h.Probe && len(next.Samples) >= p.Window:
		next.Recall, next.Probe = p.Recall, false
	}
	switch {
	case d.Pressure > 1:
		// 3. Violated: grow by the shortfall, and remember the capacity asked for.
		want := scaleCapacity(cur.Capacity(), min(d.Pressure, MaxGrowthPerPeriod))
		next.ViolatedAge = 0
		next.NeededCapacity = max(next.NeededCapacity, want)
		d.Size = grow(cur, want, p.Bounds, in.InPlaceBlocked)
		d.Action, d.Reason = Grow, ReasonViolated
		if in.Unresponsive {
			d.Reason = ReasonUnresponsive
		}
		if d.Size == cur {
			d.Action, d.Reason = Hold, ReasonAtMaximum
		}
	case d.Pressure < 1-p.ShrinkMargin:
		// 4. Over-performing beyond the margin, for a whole window.
		d.Reason = ReasonSettling
		if len(next.Samples) >= p.Window {
			d.Size, d.Action, d.Reason = shrinkDecision(p, cur, d.Pressure, next.NeededCapacity)
		}
	default:
		// 5. Within the margin: hold.
		d.Reason = ReasonWithinMargin
	}
	if d.Size != cur {
		next.Samples = nil
		next.Probe = d.Action == Shrink && next.NeededCapacity == 0
	}
	return d, next
}

// shrinkDecision is step 4 of the law: the capacity where the metric is predicted at half the
// margin from the target, at most halving, and at least need.
func shrinkDecision(p Policy, cur Size, pressure float64, need int64) (Size, Action, string) {
	want := max(scaleCapacity(cur.Capacity(), max(pressure/(1-p.ShrinkMargin/2), minShrinkFactor)), need)
	next := shrink(cur, want, p.Bounds)
	switch {
	case next != cur:
		return next, Shrink, ReasonOverPerforming
	case need >= cur.Capacity():
		return cur, Hold, ReasonRecentViolation
	default:
		return cur, Hold, ReasonAtMinimum
	}
}

// Violated says whether one measurement is on the wrong side of the target (false for NaN).
func (p Policy) Violated(measured float64) bool { return pressure(p, measured) > 1 }

// pressure is the smoothed value's ratio to the target, oriented so that above 1 is a violation.
func pressure(p Policy, smoothed float64) float64 {
	if !p.AtLeast {
		return smoothed / p.Target
	}
	if smoothed == 0 {
		return math.Inf(1)
	}
	return p.Target / smoothed
}

func appendWindow(samples []float64, m float64, window int) []float64 {
	out := make([]float64, 0, window)
	if drop := len(samples) + 1 - window; drop > 0 {
		samples = samples[drop:]
	}
	return append(append(out, samples...), m)
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// scaleCapacity is c×f millicores, rounded up.
func scaleCapacity(c int64, f float64) int64 { return ceilF(float64(c) * f) }
