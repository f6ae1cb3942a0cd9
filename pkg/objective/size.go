package objective

import "math"

// Rounding of the per-pod size: memory to whole MiB, I/O bandwidth to whole kB/s (CPU is in
// millicores already).
const (
	memoryStep = 1 << 20
	ioStep     = 1000
)

// grow returns a size of at least want millicores of capacity, or the largest the bounds allow:
// in place first (unless blocked), then by replicas. No field of cur shrinks.
func grow(cur Size, want int64, b Bounds, inPlaceBlocked bool) Size {
	next := cur
	// 1. In place: each pod gets the CPU that spreads want over the current replicas, within
	//    its bounds; memory and I/O bandwidth follow by the same factor.
	if !inPlaceBlocked {
		next.CPUMilli = clamp(ceilDiv(want, int64(cur.Replicas)), cur.CPUMilli, b.Max.CPUMilli)
		scalePod(&next, cur, b)
	}
	// 2. Replicas for what the pods cannot take.
	if next.Capacity() < want {
		next.Replicas = int32(clamp(ceilDiv(want, next.CPUMilli), int64(cur.Replicas), int64(b.Max.Replicas)))
	}
	return next
}

// shrink returns a size of at least want millicores of capacity, or the smallest the bounds
// allow: replicas first (the last added go first), then in place. No field of cur grows.
func shrink(cur Size, want int64, b Bounds) Size {
	next := cur
	// 1. The fewest replicas at the current pod size that still give want.
	next.Replicas = int32(clamp(ceilDiv(want, cur.CPUMilli), int64(b.Min.Replicas), int64(cur.Replicas)))
	// 2. The smallest pods that, that many, still give want.
	next.CPUMilli = clamp(ceilDiv(want, int64(next.Replicas)), b.Min.CPUMilli, cur.CPUMilli)
	scalePod(&next, cur, b)
	return next
}

// scalePod scales next's memory and I/O bandwidth from cur's (within b) by the factor its CPU
// changed, rounded up to their steps, between cur's value and the bound in the direction of the
// change.
func scalePod(next *Size, cur Size, b Bounds) {
	f := float64(next.CPUMilli) / float64(cur.CPUMilli)
	scale := func(v, step, lo, hi int64) int64 {
		s := ceilTo(ceilF(float64(v)*f), step)
		if f >= 1 {
			return clamp(s, v, hi)
		}
		return clamp(s, lo, v)
	}
	next.MemoryBytes = scale(cur.MemoryBytes, memoryStep, b.Min.MemoryBytes, b.Max.MemoryBytes)
	next.IOBytesPerSecond = scale(cur.IOBytesPerSecond, ioStep, b.Min.IOBytesPerSecond, b.Max.IOBytesPerSecond)
}

// clampSize brings every field of s within b.
func clampSize(s Size, b Bounds) Size {
	return Size{
		Replicas:         int32(clamp(int64(s.Replicas), int64(b.Min.Replicas), int64(b.Max.Replicas))),
		CPUMilli:         clamp(s.CPUMilli, b.Min.CPUMilli, b.Max.CPUMilli),
		MemoryBytes:      clamp(s.MemoryBytes, b.Min.MemoryBytes, b.Max.MemoryBytes),
		IOBytesPerSecond: clamp(s.IOBytesPerSecond, b.Min.IOBytesPerSecond, b.Max.IOBytesPerSecond),
	}
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// ceilF rounds x up to an integer, ignoring float error of a billionth of x (2000×(0.6/0.9) is
// 2000, not 2001).
func ceilF(x float64) int64 { return int64(math.Ceil(x - math.Abs(x)*1e-9)) }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func ceilTo(v, step int64) int64 { return ceilDiv(v, step) * step }
