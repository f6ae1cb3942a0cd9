// Package dgemm times dense double-precision matrix products (C = A·B, row-major) through the
// BLAS backend chosen at build time — OpenBLAS through cgo with `-tags openblas`, gonum's pure-Go
// BLAS otherwise — and checks the results: a small product against a naive triple loop before
// timing, the big one by its checksum and spot entries afterwards. It owns the kernel and its
// verification; it does not decide how many processes run or where they run.
package dgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backend multiplies row-major matrices: c (m×n) = a (m×k) · b (k×n). Slices must hold at
// least m·k, k·n and m·n elements.
type Backend interface {
	Name() string
	Gemm(m, n, k int, a, b, c []float64)
}

// NewBackend returns the backend this binary was built with, made single-threaded for the
// whole process: one process is one rank of an EP run.
func NewBackend() Backend { return newBackend() }

// BackendName names the backend of this binary without setting it up.
func BackendName() string { return backendName() }

// Result is one timed run.
type Result struct {
	Backend string
	N       int
	Reps    int
	Seconds float64
	// GFLOPS is the sustained rate over the run: 2n³·Reps / Seconds / 1e9.
	GFLOPS float64
	// BestGFLOPS is the rate of the fastest single product.
	BestGFLOPS float64
	// Check is the worst error found by the verification, as a fraction of its bound (≤ 1 passes).
	Check float64
}

// Problem holds an n×n product ready to time.
type Problem struct {
	be      Backend
	n       int
	a, b, c []float64
	check   float64
}

// maxN keeps three n×n matrices within 24 GiB.
const maxN = 32768

// Prepare checks be on a small product against a naive triple loop, then allocates and fills
// the n×n matrices with deterministic values in [-1, 1).
func Prepare(be Backend, n int) (*Problem, error) {
	if n < 1 || n > maxN {
		return nil, fmt.Errorf("matrix order %d out of range: use 1 to %d", n, maxN)
	}
	small, err := checkSmall(be)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	p := &Problem{be: be, n: n, a: random(rng, n*n), b: random(rng, n*n), c: make([]float64, n*n), check: small}
	return p, nil
}

func random(rng *rand.Rand, size int) []float64 {
	x := make([]float64, size)
	for i := range x {
		x[i] = 2*rng.Float64() - 1
	}
	return x
}

// Run multiplies until both minReps products are done and minDuration has passed, then
// verifies the last product.
func (p *Problem) Run(minDuration time.Duration, minReps int) (Result, error) {
	flops := 2 * math.Pow(float64(p.n), 3)
	best := math.Inf(1)
	reps := 0
	start := time.Now()
	for elapsed := time.Duration(0); reps < max(minReps, 1) || elapsed < minDuration; reps++ {
		t0 := time.Now()
		p.be.Gemm(p.n, p.n, p.n, p.a, p.b, p.c)
		best = min(best, time.Since(t0).Seconds())
		elapsed = time.Since(start)
	}
	secs := time.Since(start).Seconds()
	big, err := p.verify()
	if err != nil {
		return Result{}, err
	}
	return Result{
		Backend:    p.be.Name(),
		N:          p.n,
		Reps:       reps,
		Seconds:    secs,
		GFLOPS:     flops * float64(reps) / secs / 1e9,
		BestGFLOPS: flops / best / 1e9,
		Check:      max(p.check, big),
	}, nil
}
