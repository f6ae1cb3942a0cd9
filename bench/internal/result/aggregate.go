package result

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Aggregate builds the Run of processes that ran together, with their totals.
func Aggregate(benchmark, backend, unit string, procs []Process) (Run, error) {
	run := Run{Benchmark: benchmark, Backend: backend, Unit: unit, Processes: procs}
	ranOn := cpuset.New()
	for _, p := range procs {
		run.Total.Rate += p.Rate
		run.Total.BestRate += p.BestRate
		run.Total.VoluntarySwitches += p.VoluntarySwitches
		run.Total.InvoluntarySwitches += p.InvoluntarySwitches
		set, err := cpulist.Parse(p.RanOn)
		if err != nil {
			return Run{}, fmt.Errorf("rank %d (pid %d): CPUs ran on %q: %w", p.Rank, p.PID, p.RanOn, err)
		}
		ranOn = ranOn.Union(set)
	}
	run.Total.RanOn = ranOn.String()
	run.Total.Counters = sumCounters(procs)
	return run, run.Validate()
}

// sumCounters adds each counter over the processes. A counter unavailable in any process is
// unavailable in the total, with that process's reason: a partial sum would read as a real one.
func sumCounters(procs []Process) []Counter {
	var out []Counter
	index := map[string]int{}
	for _, p := range procs {
		for _, c := range p.Counters {
			i, ok := index[c.Name]
			if !ok {
				index[c.Name] = len(out)
				t := Counter{Name: c.Name, Unit: c.Unit, Scaled: c.Scaled, Unavailable: c.Unavailable}
				if c.Value != nil {
					v := *c.Value
					t.Value = &v
				}
				out = append(out, t)
				continue
			}
			t := &out[i]
			t.Scaled = t.Scaled || c.Scaled
			switch {
			case t.Unavailable != "":
			case c.Unavailable != "":
				t.Value, t.Unavailable = nil, fmt.Sprintf("rank %d: %s", p.Rank, c.Unavailable)
			default:
				*t.Value += *c.Value
			}
		}
	}
	return out
}
