// Package worker is fgworker: EP-DGEMM and EP-STREAM over N processes of itself with perf
// counters and thread placement for each, and a noisy neighbour that loads CPUs and memory. It
// wires the kernels (dgemm, stream), the observers (perf, threads) and the process handshake
// (ep) together and prints the result; flags are parsed by the main package into Options.
package worker

import (
	"fmt"
	"time"
)

// Modes fgworker runs in.
const (
	ModeDGEMM  = "dgemm"
	ModeSTREAM = "stream"
	ModeNoise  = "noise"
)

// Output formats: a table, a JSON document, or log: one line LogPrefix + compact JSON, which a
// reader finds in a container log that mixes the result with log messages.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputLog   = "log"
)

// Options is everything fgworker can be told.
type Options struct {
	Mode   string
	Procs  int
	Output string

	// DGEMM: matrix order, and how long / how many products at least.
	N        int
	Duration time.Duration
	MinReps  int

	// STREAM: elements per array (0: four times the last-level caches) and passes.
	ArrayLen int
	NTimes   int

	// Noise: threads and bytes each thread streams over, for Duration (0: until stopped); with log
	// output it also writes its running totals every Report (0: only at the end).
	NoiseThreads int
	NoiseBytes   int64
	Report       time.Duration

	// StartAt, when set, is the moment an EP parent releases its ranks, so that EP runs in
	// separate containers (one pod per rank) time together. AwaitCPUs, when positive, makes the
	// parent first wait until every rank may run on exactly that many CPUs: a container that a
	// node agent pins after it started must time nothing unpinned.
	StartAt   time.Time
	AwaitCPUs int

	SysfsRoot, ProcRoot string
	SampleInterval      time.Duration
	ReadyTimeout        time.Duration

	// Child is set on the processes the EP parent starts; Rank is their index.
	Child bool
	Rank  int
}

// Validate checks the options make sense together.
func (o Options) Validate() error {
	switch {
	case o.Mode != ModeDGEMM && o.Mode != ModeSTREAM && o.Mode != ModeNoise:
		return fmt.Errorf("unknown mode %q: use %s, %s or %s", o.Mode, ModeDGEMM, ModeSTREAM, ModeNoise)
	case o.Output != OutputTable && o.Output != OutputJSON && o.Output != OutputLog:
		return fmt.Errorf("unknown output format %q: use %s, %s or %s", o.Output, OutputTable, OutputJSON, OutputLog)
	case o.Procs < 1 || o.Procs > 4096:
		return fmt.Errorf("-np %d: use 1 to 4096 processes", o.Procs)
	case o.Duration < 0 || o.MinReps < 0:
		return fmt.Errorf("-duration %v and -reps %d must not be negative", o.Duration, o.MinReps)
	case o.ArrayLen < 0:
		return fmt.Errorf("-array %d must not be negative (0 sizes it from the caches)", o.ArrayLen)
	case o.Mode == ModeSTREAM && o.NTimes < 2:
		return fmt.Errorf("-ntimes %d: STREAM needs at least 2 passes", o.NTimes)
	case o.Mode == ModeNoise && (o.NoiseThreads < 1 || o.NoiseBytes < 1<<20):
		return fmt.Errorf("noise needs -threads ≥ 1 and -mem ≥ 1 MiB, got %d and %d bytes", o.NoiseThreads, o.NoiseBytes)
	case o.AwaitCPUs < 0 || o.Report < 0:
		return fmt.Errorf("-await-cpus %d and -report %v must not be negative", o.AwaitCPUs, o.Report)
	case o.Mode == ModeNoise && (o.AwaitCPUs > 0 || !o.StartAt.IsZero()):
		return fmt.Errorf("-await-cpus and -start-at apply to dgemm and stream ranks, not to noise")
	case o.SampleInterval <= 0 || o.ReadyTimeout <= 0:
		return fmt.Errorf("-sample %v and -ready-timeout %v must be positive", o.SampleInterval, o.ReadyTimeout)
	}
	return nil
}
