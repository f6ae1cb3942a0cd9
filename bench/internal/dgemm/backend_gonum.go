//go:build !openblas

package dgemm

import (
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

type gonumBackend struct{ impl gonum.Implementation }

// newBackend limits the process to one running goroutine: gonum splits a product over
// GOMAXPROCS workers, and a rank must use one CPU.
func newBackend() Backend {
	runtime.GOMAXPROCS(1)
	return gonumBackend{}
}

func backendName() string { return "gonum (pure Go, 1 thread)" }

func (gonumBackend) Name() string { return backendName() }

func (g gonumBackend) Gemm(m, n, k int, a, b, c []float64) {
	g.impl.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n)
}
