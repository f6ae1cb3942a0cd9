package objective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomPolicy draws bounds, a direction, a target and a margin.
func randomPolicy(r *rand.Rand) Policy {
	between := func(lo, hi int64) int64 { return lo + r.Int64N(hi-lo+1) }
	minS := Size{Replicas: int32(between(1, 4)), CPUMilli: between(1, 2000), MemoryBytes: between(mi, 2*gi), IOBytesPerSecond: between(1000, 20_000_000)}
	maxS := Size{
		Replicas:         minS.Replicas + int32(between(0, 20)),
		CPUMilli:         minS.CPUMilli + between(0, 16000),
		MemoryBytes:      minS.MemoryBytes + between(0, 16*gi),
		IOBytesPerSecond: minS.IOBytesPerSecond + between(0, 500_000_000),
	}
	return Policy{
		Target: 0.001 + r.Float64(), AtLeast: r.IntN(2) == 0, ShrinkMargin: 0.01 + 0.98*r.Float64(),
		Bounds: Bounds{Min: minS, Max: maxS}, Window: 1 + r.IntN(5), Recall: r.IntN(40),
	}
}

func randomSize(r *rand.Rand, b Bounds) Size {
	in := func(lo, hi int64) int64 { return lo + r.Int64N(hi-lo+1) }
	return Size{
		Replicas:         int32(in(int64(b.Min.Replicas), int64(b.Max.Replicas))),
		CPUMilli:         in(b.Min.CPUMilli, b.Max.CPUMilli),
		MemoryBytes:      in(b.Min.MemoryBytes, b.Max.MemoryBytes),
		IOBytesPerSecond: in(b.Min.IOBytesPerSecond, b.Max.IOBytesPerSecond),
	}
}

// randomMeasurement is a value from far below to far above the target, sometimes none.
func randomMeasurement(r *rand.Rand, p Policy) float64 {
	switch r.IntN(20) {
	case 0:
		return math.NaN()
	case 1:
		return 0
	}
	return p.Target * math.Exp(4*r.NormFloat64())
}

func within(s Size, b Bounds) bool {
	return s.Replicas >= b.Min.Replicas && s.Replicas <= b.Max.Replicas &&
		s.CPUMilli >= b.Min.CPUMilli && s.CPUMilli <= b.Max.CPUMilli &&
		s.MemoryBytes >= b.Min.MemoryBytes && s.MemoryBytes <= b.Max.MemoryBytes &&
		s.IOBytesPerSecond >= b.Min.IOBytesPerSecond && s.IOBytesPerSecond <= b.Max.IOBytesPerSecond
}

func TestPropertyBoundsNeverExceeded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 20))
	for range 2000 {
		p := randomPolicy(r)
		cur := Start(p.Bounds)
		if !within(cur, p.Bounds) {
			t.Fatalf("Start(%+v) = %v, outside the bounds", p.Bounds, cur)
		}
		var h History
		for range 40 {
			var d Decision
			d, h = Decide(p, h, Input{Current: cur, Measured: randomMeasurement(r, p), InPlaceBlocked: r.IntN(4) == 0})
			if !within(d.Size, p.Bounds) {
				t.Fatalf("policy %+v: from %v the decision %+v is outside the bounds", p, cur, d)
			}
			cur = d.Size
		}
	}
}

func TestPropertySteadyMetricDoesNotOscillate(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 20))
	for range 2000 {
		p := randomPolicy(r)
		m := randomMeasurement(r, p)
		cur := randomSize(r, p.Bounds)
		var h History
		grew, shrank := false, false
		for range 60 {
			var d Decision
			d, h = Decide(p, h, Input{Current: cur, Measured: m})
			grew = grew || d.Action == Grow
			shrank = shrank || d.Action == Shrink
			cur = d.Size
		}
		if grew && shrank {
			t.Fatalf("policy %+v: the steady metric %v drew both growths and shrinks", p, m)
		}
	}
}

// A larger shortfall (a larger AtMost metric, a smaller AtLeast one) never yields a smaller
// capacity or fewer replicas, from the same size and history.
func TestPropertyMonotoneInShortfall(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 20))
	for range 20000 {
		p := randomPolicy(r)
		cur := randomSize(r, p.Bounds)
		h := History{NeededCapacity: r.Int64N(2 * cur.Capacity()), ViolatedAge: r.IntN(40)}
		for range r.IntN(p.Window) {
			h.Samples = append(h.Samples, p.Target*math.Exp(r.NormFloat64()))
		}
		a, b := p.Target*math.Exp(2*r.NormFloat64()), p.Target*math.Exp(2*r.NormFloat64())
		worse, better := max(a, b), min(a, b)
		if p.AtLeast {
			worse, better = better, worse
		}
		dw, _ := Decide(p, h, Input{Current: cur, Measured: worse})
		db, _ := Decide(p, h, Input{Current: cur, Measured: better})
		if dw.Size.Capacity() < db.Size.Capacity() || dw.Size.Replicas < db.Size.Replicas {
			t.Fatalf("policy %+v, size %v, history %+v: %v gives %v but the better %v gives %v",
				p, cur, h, worse, dw.Size, better, db.Size)
		}
	}
}

// In a closed loop with a service whose latency falls with its capacity but not as the law's
// proportional model predicts (a fixed part plus one falling with a power 0.5 to 2.5 of the
// capacity), under a steady load the size does not oscillate: where no size both meets the
// target and stays within the margin, the failed probes grow rarer (the recall doubles), so the
// changes of direction over a long run are logarithmic in its length — without the doubling,
// such services reverse every Recall periods (over 100 times in this run).
func TestPropertyClosedLoopSettles(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 20))
	const periods = 2000
	bound := 3 + 3*int(math.Ceil(math.Log2(periods/DefaultRecall)))
	for range 500 {
		p := randomPolicy(r)
		p.AtLeast = false
		p.Recall = DefaultRecall
		base := p.Target * 0.5 * r.Float64()
		// The capacity that meets the target exactly lies within the reachable range.
		lo, hi := float64(p.Bounds.Min.Capacity()), float64(p.Bounds.Max.Capacity())
		need := lo + (hi-lo)*r.Float64()*0.9
		e := 0.5 + 2*r.Float64()
		work := (p.Target - base) * math.Pow(need, e)
		latency := func(s Size) float64 { return base + work/math.Pow(float64(s.Capacity()), e) }

		cur := Start(p.Bounds)
		var h History
		var last Action
		reversals := 0
		for range periods {
			var d Decision
			d, h = Decide(p, h, Input{Current: cur, Measured: latency(cur)})
			if d.Action != Hold {
				if last != "" && d.Action != last {
					reversals++
				}
				last = d.Action
			}
			cur = d.Size
		}
		if reversals > bound {
			t.Fatalf("policy %+v, latency %v + %v/capacity^%v: %d reversals in %d periods, want at most %d",
				p, base, work, e, reversals, periods, bound)
		}
	}
}
