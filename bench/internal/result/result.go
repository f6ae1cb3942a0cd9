// Package result is fgworker's output format: the JSON document one run of EP-DGEMM or
// EP-STREAM writes (every process's rate, perf counters, context switches and the CPUs it ran
// on, plus the totals), how to read it back with validation, and its table rendering. It holds
// data only; it measures nothing and starts nothing.
package result

// Benchmarks fgworker runs, and the unit of their rates.
const (
	BenchDGEMM  = "dgemm"
	BenchSTREAM = "stream"

	UnitGFLOPS = "GFLOP/s"
	UnitGBs    = "GB/s"
)

// Run is the output of one fgworker invocation: N processes of one benchmark running together.
type Run struct {
	Benchmark string `json:"benchmark"`
	// Backend is the BLAS library of a DGEMM run.
	Backend   string    `json:"backend,omitempty"`
	Unit      string    `json:"unit"`
	Processes []Process `json:"processes"`
	Total     Total     `json:"total"`
}

// Total sums the processes of a run.
type Total struct {
	// Rate is the sum of the processes' sustained rates, BestRate of their best rates.
	Rate     float64   `json:"rate"`
	BestRate float64   `json:"bestRate"`
	Counters []Counter `json:"counters"`
	// VoluntarySwitches and InvoluntarySwitches sum the procfs counts of every thread.
	VoluntarySwitches   uint64 `json:"voluntarySwitches"`
	InvoluntarySwitches uint64 `json:"involuntarySwitches"`
	// RanOn is the union of the CPUs the processes ran on, in kernel list format.
	RanOn string `json:"ranOn"`
}

// Process is one rank of an EP run.
type Process struct {
	Rank int `json:"rank"`
	PID  int `json:"pid"`
	// Rate is the sustained rate over the timed window: all DGEMM products over their time, or
	// STREAM triad bytes over the average pass. BestRate is the fastest single product or pass.
	Rate     float64      `json:"rate"`
	BestRate float64      `json:"bestRate"`
	Seconds  float64      `json:"seconds"`
	DGEMM    *DGEMMStats  `json:"dgemm,omitempty"`
	STREAM   *STREAMStats `json:"stream,omitempty"`
	// Counters are the perf counters of all the process's threads over the timed window.
	Counters []Counter `json:"counters"`
	// AffinityAtInit was read before main ran; AffinityAtStart when timing began.
	AffinityAtInit  string `json:"affinityAtInit"`
	AffinityAtStart string `json:"affinityAtStart"`
	// RanOn is the set of CPUs the process's threads were seen running on.
	RanOn               string   `json:"ranOn"`
	VoluntarySwitches   uint64   `json:"voluntarySwitches"`
	InvoluntarySwitches uint64   `json:"involuntarySwitches"`
	Threads             []Thread `json:"threads"`
}

// DGEMMStats describes the products one process timed.
type DGEMMStats struct {
	N    int `json:"n"`
	Reps int `json:"reps"`
	// Check is the worst verification error as a fraction of its bound; ≤ 1 passed.
	Check float64 `json:"check"`
	// Backend is the BLAS library the process multiplied with (its binary's build).
	Backend string `json:"backend,omitempty"`
}

// STREAMStats describes the passes one process timed.
type STREAMStats struct {
	ArrayLen int      `json:"arrayLen"`
	NTimes   int      `json:"ntimes"`
	Kernels  []Kernel `json:"kernels"`
}

// Kernel is one STREAM kernel as STREAM reports it.
type Kernel struct {
	Name       string  `json:"name"`
	BestGBs    float64 `json:"bestGBs"`
	AvgGBs     float64 `json:"avgGBs"`
	MinSeconds float64 `json:"minSeconds"`
	AvgSeconds float64 `json:"avgSeconds"`
	MaxSeconds float64 `json:"maxSeconds"`
}

// Counter is one perf event: either a Value or the reason it is Unavailable, never both.
type Counter struct {
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	// Value is absent when the kernel gave no count.
	Value *uint64 `json:"value,omitempty"`
	// Scaled is set when the kernel multiplexed the counter and Value was extrapolated.
	Scaled      bool   `json:"scaled,omitempty"`
	Unavailable string `json:"unavailable,omitempty"`
}

// Thread is what procfs showed of one thread over the timed window.
type Thread struct {
	TID         int    `json:"tid"`
	Comm        string `json:"comm"`
	Voluntary   uint64 `json:"voluntary"`
	Involuntary uint64 `json:"involuntary"`
	RanOn       string `json:"ranOn"`
	Exited      bool   `json:"exited,omitempty"`
}

// Counter returns the counter named name, if the run has it.
func (t Total) Counter(name string) (Counter, bool) {
	for _, c := range t.Counters {
		if c.Name == name {
			return c, true
		}
	}
	return Counter{}, false
}
