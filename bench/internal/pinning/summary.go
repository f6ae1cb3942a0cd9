package pinning

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Row summarises the samples of one scenario and benchmark run one way (Via).
type Row struct {
	Via       string `json:"via"`
	Scenario  string `json:"scenario"`
	Benchmark string `json:"benchmark"`
	// Backend is the BLAS library of DGEMM ranks.
	Backend string `json:"backend,omitempty"`
	Unit    string `json:"unit"`
	// Median, Min and Max of the total sustained rate of the ranks over the runs.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
	// RatioToAlone is Median over the alone scenario's median for the same benchmark and Via.
	RatioToAlone float64 `json:"ratioToAlone"`
	// CPUShare is the median fraction of their wall time the ranks spent on a CPU (task-clock
	// over rank seconds).
	CPUShare float64 `json:"cpuShare"`
	// PerCPUSecond is the median rate per second the ranks actually ran (rate over CPU share): it
	// separates work lost to waiting for a CPU from work lost while running (cache, memory
	// bandwidth, migrations).
	PerCPUSecond float64 `json:"perCPUSecond"`
	// ContextSwitches and CPUMigrations are medians of the perf counters summed over the ranks.
	ContextSwitches float64 `json:"contextSwitches"`
	CPUMigrations   float64 `json:"cpuMigrations"`
	// VoluntarySwitches and InvoluntarySwitches are medians of the procfs counts.
	VoluntarySwitches   float64 `json:"voluntarySwitches"`
	InvoluntarySwitches float64 `json:"involuntarySwitches"`
	// RanOn is every CPU a rank was seen on in any run; Ranks and Neighbour say where the
	// scenario put them (a cpuset, "floating", or "none" for an absent neighbour).
	RanOn     string `json:"ranOn"`
	Ranks     string `json:"ranks"`
	Neighbour string `json:"neighbour"`
	// NoiseGBs is the median memory traffic of the neighbour, when there was one.
	NoiseGBs float64 `json:"noiseGBs,omitempty"`
	// Hardware are the hardware counters: a median value, or why they are unavailable.
	Hardware []result.Counter `json:"hardware"`
}

// busyShare is the CPU share below which the baseline itself was starved by other work.
const busyShare = 0.9

var hardwareCounters = []string{"cycles", "instructions", "LLC-loads", "LLC-load-misses"}

// Summarize groups samples by how they ran (in the order first seen), benchmark and scenario,
// in the order given; each ratio is taken against alone run the same way.
func Summarize(samples []Sample, scenarios, benchmarks []string) ([]Row, error) {
	var vias []string
	for _, s := range samples {
		if !slices.Contains(vias, s.Via) {
			vias = append(vias, s.Via)
		}
	}
	var rows []Row
	for _, via := range vias {
		for _, bm := range benchmarks {
			first := len(rows)
			var alone float64
			for _, sc := range scenarios {
				var group []Sample
				for _, s := range samples {
					if s.Via == via && s.Scenario == sc && s.Benchmark == bm {
						group = append(group, s)
					}
				}
				if len(group) == 0 {
					continue
				}
				r, err := summarize(group)
				if err != nil {
					return nil, fmt.Errorf("%s, scenario %s, %s: %w", via, sc, bm, err)
				}
				if sc == Alone {
					alone = r.Median
				}
				rows = append(rows, r)
			}
			if len(rows) == first {
				continue
			}
			if alone == 0 {
				return nil, fmt.Errorf("%s, %s: no %s sample to take ratios against", via, bm, Alone)
			}
			for i := first; i < len(rows); i++ {
				rows[i].RatioToAlone = rows[i].Median / alone
			}
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no samples of benchmarks %v in scenarios %v", benchmarks, scenarios)
	}
	return rows, nil
}

func summarize(group []Sample) (Row, error) {
	first := group[0]
	r := Row{Via: first.Via, Scenario: first.Scenario, Benchmark: first.Benchmark, Backend: first.Run.Backend, Unit: first.Run.Unit, Runs: len(group),
		Ranks: first.Ranks, Neighbour: first.Neighbour}
	var rates, shares, perCPU, cs, migr, vol, invol, noise []float64
	ranOn := cpuset.New()
	for _, s := range group {
		t := s.Run.Total
		rates = append(rates, t.Rate)
		vol = append(vol, float64(t.VoluntarySwitches))
		invol = append(invol, float64(t.InvoluntarySwitches))
		for name, dst := range map[string]*[]float64{"context-switches": &cs, "cpu-migrations": &migr} {
			v, err := counterValue(t, name)
			if err != nil {
				return Row{}, err
			}
			*dst = append(*dst, v)
		}
		clock, err := counterValue(t, "task-clock")
		if err != nil {
			return Row{}, err
		}
		secs := 0.0
		for _, p := range s.Run.Processes {
			secs += p.Seconds
		}
		share := clock / 1e9 / secs
		shares, perCPU = append(shares, share), append(perCPU, t.Rate/share)
		set, err := cpulist.Parse(t.RanOn)
		if err != nil {
			return Row{}, fmt.Errorf("repeat %d: CPUs ran on %q: %w", s.Repeat, t.RanOn, err)
		}
		ranOn = ranOn.Union(set)
		if s.Noise != nil {
			noise = append(noise, s.Noise.GBs)
		}
	}
	r.Median, r.Min, r.Max = median(rates), slices.Min(rates), slices.Max(rates)
	r.CPUShare, r.PerCPUSecond = median(shares), median(perCPU)
	r.ContextSwitches, r.CPUMigrations = median(cs), median(migr)
	r.VoluntarySwitches, r.InvoluntarySwitches = median(vol), median(invol)
	r.RanOn = ranOn.String()
	if len(noise) > 0 {
		r.NoiseGBs = median(noise)
	}
	r.Hardware = hardware(group)
	return r, nil
}

// hardware gives each hardware counter's median, or the first reason a run could not count it.
func hardware(group []Sample) []result.Counter {
	var out []result.Counter
	for _, name := range hardwareCounters {
		c := result.Counter{Name: name}
		var vals []float64
		for _, s := range group {
			got, ok := s.Run.Total.Counter(name)
			switch {
			case !ok:
				c.Unavailable = "not measured"
			case got.Value == nil:
				c.Unavailable = got.Unavailable
			default:
				vals = append(vals, float64(*got.Value))
			}
			if c.Unavailable != "" {
				break
			}
		}
		if c.Unavailable == "" {
			v := uint64(median(vals))
			c.Value = &v
		}
		out = append(out, c)
	}
	return out
}

// counterValue returns a software counter every run must have.
func counterValue(t result.Total, name string) (float64, error) {
	c, ok := t.Counter(name)
	if !ok || c.Value == nil {
		return 0, fmt.Errorf("software counter %s missing: %s", name, c.Unavailable)
	}
	return float64(*c.Value), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// WriteMarkdown prints the rows as a markdown table, with the reasons hardware counters are
// missing below it.
func WriteMarkdown(b *strings.Builder, rows []Row) {
	b.WriteString("| via | scenario | benchmark | median | min – max | ratio to alone | CPU share | per CPU-second | context switches | migrations | involuntary (procfs) | ranks pinned to | ranks ran on | neighbour on | neighbour GB/s |")
	for _, h := range hardwareCounters {
		b.WriteString(" " + h + " |")
	}
	b.WriteString("\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|--:|")
	b.WriteString(strings.Repeat("--:|", len(hardwareCounters)) + "\n")
	reasons := map[string]bool{}
	var notes []string
	for _, r := range rows {
		noise := "–"
		if r.NoiseGBs > 0 {
			noise = fmt.Sprintf("%.1f", r.NoiseGBs)
		}
		bench := r.Benchmark
		if r.Backend != "" {
			bench += ", " + r.Backend
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f %s | %.2f – %.2f | %.3f | %.2f | %.2f | %.0f | %.0f | %.0f | %s | %s | %s | %s |",
			r.Via, r.Scenario, bench, r.Median, r.Unit, r.Min, r.Max, r.RatioToAlone, r.CPUShare, r.PerCPUSecond,
			r.ContextSwitches, r.CPUMigrations, r.InvoluntarySwitches, r.Ranks, r.RanOn, r.Neighbour, noise)
		for _, c := range r.Hardware {
			b.WriteString(" " + result.CounterString(c) + " |")
			if c.Unavailable != "" && !reasons[c.Unavailable] {
				reasons[c.Unavailable] = true
				notes = append(notes, c.Unavailable)
			}
		}
		b.WriteString("\n")
	}
	for _, r := range rows {
		if r.Scenario == Alone && r.CPUShare < busyShare {
			fmt.Fprintf(b, "\n**Busy machine:** alone (%s), the %s ranks got only %.0f %% of their CPU time: other load outside the bench's cgroups "+
				"(not in any pool the allocator controls) dominates these ratios; measure on a quiet machine or a node whose other work runs in the shared pool.\n",
				r.Via, r.Benchmark, 100*r.CPUShare)
		}
	}
	b.WriteString("\nmedian: total sustained rate of the ranks (DGEMM: all products over their time; STREAM: triad over the average pass). " +
		"CPU share: the ranks' task-clock over their wall time (1 = never waiting for a CPU). " +
		"Context switches and migrations: perf software counters over all threads of the ranks; involuntary: procfs.\n")
	for _, n := range notes {
		fmt.Fprintf(b, "\nn/a: %s", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
}
