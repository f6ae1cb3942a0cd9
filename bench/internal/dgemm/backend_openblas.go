//go:build openblas

package dgemm

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import (
	"fmt"
	"strings"
)

type openBLAS struct{ name string }

// newBackend makes OpenBLAS single-threaded for the process (openblas_set_num_threads(1)).
func newBackend() Backend {
	C.openblas_set_num_threads(1)
	return openBLAS{name: backendName()}
}

func backendName() string {
	version := "unknown version"
	// The config string starts "OpenBLAS 0.3.21 DYNAMIC_ARCH ...".
	if f := strings.Fields(C.GoString(C.openblas_get_config())); len(f) >= 2 {
		version = f[1]
	}
	return fmt.Sprintf("openblas %s (%s kernels, 1 thread)", version, C.GoString(C.openblas_get_corename()))
}

func (o openBLAS) Name() string { return o.name }

func (openBLAS) Gemm(m, n, k int, a, b, c []float64) {
	if len(a) < m*k || len(b) < k*n || len(c) < m*n {
		panic(fmt.Sprintf("dgemm: slices shorter than %dx%dx%d", m, k, n)) // C would read past them
	}
	C.cblas_dgemm(C.CblasRowMajor, C.CblasNoTrans, C.CblasNoTrans, C.blasint(m), C.blasint(n), C.blasint(k),
		1, (*C.double)(&a[0]), C.blasint(k), (*C.double)(&b[0]), C.blasint(n), 0, (*C.double)(&c[0]), C.blasint(n))
}
