package dgemm

import (
	"strings"
	"testing"
)

func TestBackendProductIsCorrect(t *testing.T) {
	be := NewBackend()
	p, err := Prepare(be, 96)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Run(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Backend != be.Name() || r.N != 96 || r.Reps != 3 {
		t.Errorf("result %+v does not describe 3 products of order 96 with %s", r, be.Name())
	}
	if !(r.Check <= 1) || !(r.GFLOPS > 0) || !(r.BestGFLOPS >= r.GFLOPS) {
		t.Errorf("implausible result %+v: want check ≤ 1, 0 < GFLOPS ≤ BestGFLOPS", r)
	}
	t.Logf("%s: %.2f GFLOP/s (best %.2f), check %.3g of bound", r.Backend, r.GFLOPS, r.BestGFLOPS, r.Check)
}

// misStrided shifts the product by one element, as a wrong leading dimension would.
type misStrided struct{ Backend }

func (ms misStrided) Gemm(m, n, k int, a, b, c []float64) {
	ms.Backend.Gemm(m, n, k, a, b, c)
	copy(c[1:m*n], c[:m*n-1])
}

// corruptBig is correct on small products and drops one element of big ones, as a blocking bug
// at the edge would.
type corruptBig struct{ Backend }

func (cb corruptBig) Gemm(m, n, k int, a, b, c []float64) {
	cb.Backend.Gemm(m, n, k, a, b, c)
	if m > 100 {
		c[m*n-1] += 0.5
	}
}

// offByULPs perturbs each element by a few units in the last place, well inside the bound.
type offByULPs struct{ Backend }

func (o offByULPs) Gemm(m, n, k int, a, b, c []float64) {
	o.Backend.Gemm(m, n, k, a, b, c)
	for i := range c[:m*n] {
		c[i] *= 1 + 4*eps
	}
}

func TestVerificationCatchesWrongProducts(t *testing.T) {
	if _, err := Prepare(misStrided{NewBackend()}, 64); err == nil || !strings.Contains(err.Error(), "naive loop") {
		t.Errorf("mis-strided product passed the small check: %v", err)
	}
	p, err := Prepare(corruptBig{NewBackend()}, 128)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(0, 1); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupted big product passed: %v", err)
	}
	p, err = Prepare(offByULPs{NewBackend()}, 128)
	if err != nil {
		t.Fatalf("rounding-level differences failed the small check: %v", err)
	}
	if _, err := p.Run(0, 1); err != nil {
		t.Errorf("rounding-level differences failed the big check: %v", err)
	}
}

func TestPrepareRejectsBadOrder(t *testing.T) {
	for _, n := range []int{0, -5, maxN + 1} {
		if _, err := Prepare(NewBackend(), n); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("order %d: got %v, want an out-of-range error", n, err)
		}
	}
}

func BenchmarkGemm256(b *testing.B) {
	be := NewBackend()
	p, err := Prepare(be, 256)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		be.Gemm(p.n, p.n, p.n, p.a, p.b, p.c)
	}
	b.ReportMetric(2*256*256*256*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
