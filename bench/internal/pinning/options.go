package pinning

import (
	"fmt"
	"slices"
	"time"
)

// Options configure a pinning bench.
type Options struct {
	// Worker is the fgworker binary the ranks and the neighbour run.
	Worker     string
	Scenarios  []string
	Benchmarks []string
	Repeats    int
	// Ranks per scenario; 0: the cores of the first NUMA node less one for the shared pool.
	Ranks int

	// DGEMM matrix order and time per run; STREAM elements per array (0: sized from the caches)
	// and passes.
	N        int
	Duration time.Duration
	ArrayLen int
	NTimes   int

	// The neighbour: threads, MiB it streams over, its CPU limit enforced as a CFS quota (0: none)
	// and how long it runs before the ranks start.
	NoiseThreads int
	NoiseMiB     int
	NoiseCPUs    float64
	NoiseWarmup  time.Duration

	SysfsRoot, ProcRoot, Mountinfo string
	// OutDir receives pinning.md, pinning.json, samples.json and one PNG per benchmark.
	OutDir string
	Output string
}

// Benchmarks the ranks can run.
var AllBenchmarks = []string{"dgemm", "stream"}

// Validate checks the options make sense together.
func (o Options) Validate() error {
	if o.Worker == "" {
		return fmt.Errorf("no fgworker binary given: build it with `make fgworker` and pass -worker")
	}
	return o.ValidateSettings()
}

// ValidateSettings checks everything but the worker binary (pods run the one in their image).
func (o Options) ValidateSettings() error {
	for _, s := range o.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return fmt.Errorf("unknown scenario %q: use %v", s, AllScenarios)
		}
	}
	for _, b := range o.Benchmarks {
		if !slices.Contains(AllBenchmarks, b) {
			return fmt.Errorf("unknown benchmark %q: use %v", b, AllBenchmarks)
		}
	}
	switch {
	case !slices.Contains(o.Scenarios, Alone):
		return fmt.Errorf("scenarios %v lack %q, the baseline every ratio is taken against", o.Scenarios, Alone)
	case len(o.Benchmarks) == 0:
		return fmt.Errorf("no benchmark chosen: use %v", AllBenchmarks)
	case o.Repeats < 1:
		return fmt.Errorf("-repeats %d: run every scenario at least once", o.Repeats)
	case o.Ranks < 0:
		return fmt.Errorf("-ranks %d must not be negative (0: the CPUs less one)", o.Ranks)
	case o.NoiseThreads < 1 || o.NoiseMiB < 1:
		return fmt.Errorf("the neighbour needs -noise-threads ≥ 1 and -noise-mib ≥ 1, got %d and %d", o.NoiseThreads, o.NoiseMiB)
	case o.NoiseCPUs < 0:
		return fmt.Errorf("-noise-cpus %v must not be negative (0: no quota)", o.NoiseCPUs)
	case o.Output != "table" && o.Output != "json":
		return fmt.Errorf("unknown output format %q: use table or json", o.Output)
	case o.OutDir == "":
		return fmt.Errorf("no output directory for the report and plots: pass -out")
	}
	return nil
}
