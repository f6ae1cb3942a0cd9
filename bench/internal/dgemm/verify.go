package dgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// eps is the spacing of float64 at 1. A dot product of length k computed in any order (blocked,
// with FMA) is within about k·eps/2 · Σ|a·b| of the exact value; the bounds below allow the
// reference the same error again.
const eps = 0x1p-52

// checkSmall multiplies a 67×53 by a 53×71 matrix — odd shapes, so a transposed or mis-strided
// call cannot pass — with be and with a naive triple loop, and compares every element.
func checkSmall(be Backend) (float64, error) {
	const m, k, n = 67, 53, 71
	rng := rand.New(rand.NewPCG(2, 3))
	a, b := random(rng, m*k), random(rng, k*n)
	got := make([]float64, m*n)
	be.Gemm(m, n, k, a, b, got)
	worst := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want, bound := 0.0, 0.0
			for l := 0; l < k; l++ {
				want += a[i*k+l] * b[l*n+j]
				bound += math.Abs(a[i*k+l] * b[l*n+j])
			}
			r := math.Abs(got[i*n+j]-want) / (float64(k) * eps * bound)
			if !(r <= 1) {
				return 0, fmt.Errorf("%s: small %dx%dx%d product wrong at C[%d][%d]: got %g, naive loop %g", be.Name(), m, k, n, i, j, got[i*n+j], want)
			}
			worst = max(worst, r)
		}
	}
	return worst, nil
}

// spotEntries is how many random elements of the big product are recomputed directly.
const spotEntries = 32

// verify checks the n×n product in p.c two ways: its total against Σ_k colsum(A)_k·rowsum(B)_k
// (O(n²), catches wrong blocks and transposes) and some entries against direct dot products.
func (p *Problem) verify() (float64, error) {
	n := p.n
	colA, colAbsA := make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		for l, v := range p.a[i*n : (i+1)*n] {
			colA[l] += v
			colAbsA[l] += math.Abs(v)
		}
	}
	want, bound := 0.0, 0.0
	for l := 0; l < n; l++ {
		rowB, rowAbsB := 0.0, 0.0
		for _, v := range p.b[l*n : (l+1)*n] {
			rowB += v
			rowAbsB += math.Abs(v)
		}
		want += colA[l] * rowB
		bound += colAbsA[l] * rowAbsB
	}
	got := 0.0
	for _, v := range p.c {
		got += v
	}
	worst := math.Abs(got-want) / (float64(n*n+3*n) * eps * bound)
	if !(worst <= 1) {
		return 0, fmt.Errorf("%s: %dx%d product failed its checksum: sum of C %g, expected %g", p.be.Name(), n, n, got, want)
	}
	rng := rand.New(rand.NewPCG(4, uint64(n)))
	for range spotEntries {
		i, j := rng.IntN(n), rng.IntN(n)
		want, bound := 0.0, 0.0
		for l := 0; l < n; l++ {
			want += p.a[i*n+l] * p.b[l*n+j]
			bound += math.Abs(p.a[i*n+l] * p.b[l*n+j])
		}
		r := math.Abs(p.c[i*n+j]-want) / (float64(n) * eps * bound)
		if !(r <= 1) {
			return 0, fmt.Errorf("%s: %dx%d product wrong at C[%d][%d]: got %g, direct dot product %g", p.be.Name(), n, n, i, j, p.c[i*n+j], want)
		}
		worst = max(worst, r)
	}
	return worst, nil
}
