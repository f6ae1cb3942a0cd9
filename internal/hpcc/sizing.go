package hpcc

import (
	"errors"
	"fmt"
	"math"
)

// Grid is HPL's P×Q process grid: P process rows, Q process columns.
type Grid struct {
	P, Q int
}

// GridFor returns the grid of exactly tasks processes that is as square as possible, P ≤ Q: P is
// the largest divisor of tasks not above its square root (16 → 4×4, 12 → 3×4, a prime p → 1×p).
// HPL runs best on a square grid, slightly wide when it cannot be.
func GridFor(tasks int) (Grid, error) {
	if tasks < 1 {
		return Grid{}, fmt.Errorf("process grid for %d tasks: want at least 1 task", tasks)
	}
	p := int(math.Sqrt(float64(tasks)))
	for p*p > tasks {
		p--
	}
	for (p+1)*(p+1) <= tasks {
		p++
	}
	for tasks%p != 0 {
		p--
	}
	return Grid{P: p, Q: tasks / p}, nil
}

// Defaults of a Sizing, and the least N Size picks.
const (
	// DefaultNB is the HPL block size of HPCC's example input.
	DefaultNB = 80
	// DefaultMemoryFraction of the job's memory goes to HPL's matrix. HPCC sizes its other tests
	// (DGEMM, STREAM, FFT, RandomAccess, PTRANS) from the matrix's share per process, so each
	// process uses about that much again at its peak; the other half of a task's memory is left to
	// MPI's buffers, the binaries and the page cache, under the worker's memory limit.
	DefaultMemoryFraction = 0.5
	// DefaultMaxGFLOPPerTask caps HPL's work per task (2N³/3 flops over the tasks): 10 GFLOP is a
	// few seconds on one current core, so the whole HPCC run of a one-task job on the local cluster
	// takes seconds; the cap grows with the cube root of the task count. 0 lifts it, for real
	// measurements that should fill memory.
	DefaultMaxGFLOPPerTask = 10
	// MinN is the floor: the N of HPCC's example input (rounded up to a multiple of NB).
	MinN = 1000
	// maxN is the largest N HPL takes: a C int.
	maxN = math.MaxInt32
	// maxNB bounds the block size far above HPL's useful range (tens to a few hundred).
	maxNB = 4096
)

// Sizing is what Size needs: the job's shape and the rules that bound N.
type Sizing struct {
	// Tasks is the number of MPI processes; the grid is GridFor(Tasks).
	Tasks int
	// MemoryPerTask in bytes (the HPCJob's taskResources.memory); required unless N is set.
	MemoryPerTask int64
	// MemoryFraction of Tasks × MemoryPerTask that HPL's matrix (8N² bytes) may use, in (0, 1].
	MemoryFraction float64
	// MaxGFLOPPerTask caps HPL's work per task, 2N³/3/Tasks flops; 0: no cap.
	MaxGFLOPPerTask float64
	// NB is HPL's block size; N is a multiple of it.
	NB int
	// N, when positive, is used as it is (no rounding, no bounds).
	N int
}

// DefaultSizing returns the sizing of tasks processes with memoryPerTask bytes each under the
// default rules.
func DefaultSizing(tasks int, memoryPerTask int64) Sizing {
	return Sizing{
		Tasks: tasks, MemoryPerTask: memoryPerTask, MemoryFraction: DefaultMemoryFraction,
		MaxGFLOPPerTask: DefaultMaxGFLOPPerTask, NB: DefaultNB,
	}
}

// Size computes HPCC's input for s. Unless s.N forces it, N is the largest multiple of NB whose
// matrix fits MemoryFraction of the job's memory and whose HPL work per task is at most
// MaxGFLOPPerTask, but at least MinN rounded up to a multiple of NB. The input's note says which
// rule decided.
func Size(s Sizing) (Input, error) {
	grid, err := GridFor(s.Tasks)
	if err != nil {
		return Input{}, err
	}
	switch {
	case s.NB < 1 || s.NB > maxNB:
		return Input{}, fmt.Errorf("HPL block size NB %d: want 1 to %d", s.NB, maxNB)
	case s.N < 0:
		return Input{}, fmt.Errorf("HPL N %d: want a positive N, or 0 to size it from memory", s.N)
	case s.N > maxN:
		return Input{}, fmt.Errorf("HPL N %d: HPL's N is a C int, at most %d", s.N, maxN)
	case s.N > 0:
		note := fmt.Sprintf("%d tasks: N=%d as given; matrix %s", s.Tasks, s.N, bytesText(matrixBytes(s.N)))
		return Input{N: s.N, NB: s.NB, Grid: grid, Note: shorten(note, s.N, "-n")}, nil
	case s.MemoryPerTask <= 0:
		return Input{}, errors.New("memory per task is required to size N (the HPCJob's taskResources.memory), or give N")
	case !(s.MemoryFraction > 0 && s.MemoryFraction <= 1):
		return Input{}, fmt.Errorf("memory fraction %v: want a number in (0, 1]", s.MemoryFraction)
	case !(s.MaxGFLOPPerTask >= 0) || math.IsInf(s.MaxGFLOPPerTask, 0):
		return Input{}, fmt.Errorf("HPL work cap %v GFLOP per task: want a finite number ≥ 0 (0: no cap)", s.MaxGFLOPPerTask)
	}

	// 1. The memory bound: 8N² ≤ fraction × tasks × memory per task.
	jobMemory := float64(s.Tasks) * float64(s.MemoryPerTask)
	n := math.Sqrt(s.MemoryFraction * jobMemory / 8)
	why := fmt.Sprintf("memory fraction %g", s.MemoryFraction)
	// 2. The work bound: 2N³/3 ≤ cap × tasks.
	if s.MaxGFLOPPerTask > 0 {
		if w := math.Cbrt(1.5 * s.MaxGFLOPPerTask * 1e9 * float64(s.Tasks)); w < n {
			n, why = w, fmt.Sprintf("work cap %g GFLOP/task", s.MaxGFLOPPerTask)
		}
	}
	// 3. Down to a multiple of NB, then up to the floor.
	N := int(math.Min(n, maxN)) / s.NB * s.NB
	if floor := (MinN + s.NB - 1) / s.NB * s.NB; N < floor {
		N, why = floor, fmt.Sprintf("floor %d", MinN)
	}
	note := fmt.Sprintf("%d tasks x %s: N=%d by %s; matrix %s of %s", s.Tasks, bytesText(float64(s.MemoryPerTask)),
		N, why, bytesText(matrixBytes(N)), bytesText(jobMemory))
	return Input{N: N, NB: s.NB, Grid: grid, Note: shorten(note, N, why)}, nil
}

// shorten keeps the note within a line HPCC reads whole, dropping the job's shape if need be.
func shorten(note string, n int, why string) string {
	if len(note) <= maxLineBytes {
		return note
	}
	return fmt.Sprintf("N=%d by %s", n, why)
}

func matrixBytes(n int) float64 { return 8 * float64(n) * float64(n) }

// bytesText writes b in the largest binary unit that keeps it at least 1, to three significant
// digits (whole units from 100 up).
func bytesText(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if b >= 100 {
		return fmt.Sprintf("%.0f %s", b, units[i])
	}
	return fmt.Sprintf("%.3g %s", b, units[i])
}
