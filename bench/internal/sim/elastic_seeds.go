package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ElasticSeeds is the elastic experiment over several generated job sets at one submission and
// rescale gap: how often each strategy comes out best, not one seed's margin.
type ElasticSeeds struct {
	Command                   string
	Slots, Jobs               int
	SubmissionGap, RescaleGap time.Duration
	Strategies                []ElasticStrategy
	Seeds                     []uint64
	// Metrics holds, for each seed of Seeds, every strategy's figures.
	Metrics []map[ElasticStrategy]ElasticMetrics
}

// RunElasticSeeds simulates every strategy on the job sets GenerateElastic draws from seeds
// first, first+1, … (n of them), jobs jobs each, submitted gap apart.
func RunElasticSeeds(command string, o ElasticOptions, strategies []ElasticStrategy, jobs int, first uint64, n int, gap time.Duration) (*ElasticSeeds, error) {
	if n < 1 {
		return nil, fmt.Errorf("elastic: %d seeds; want at least 1", n)
	}
	out := &ElasticSeeds{Command: command, Slots: o.Slots, Jobs: jobs, SubmissionGap: gap, RescaleGap: o.RescaleGap, Strategies: strategies}
	for seed := first; seed < first+uint64(n); seed++ {
		set, err := GenerateElastic(&o.Model, jobs, seed, gap)
		if err != nil {
			return nil, err
		}
		m := map[ElasticStrategy]ElasticMetrics{}
		for _, s := range strategies {
			r, err := SimulateElastic(set, s, o)
			if err != nil {
				return nil, fmt.Errorf("seed %d, %s: %w", seed, s, err)
			}
			m[s] = r.Metrics
		}
		out.Seeds = append(out.Seeds, seed)
		out.Metrics = append(out.Metrics, m)
	}
	return out, nil
}

// elasticSeedMetrics are the paper's four metrics; better says which way is better.
var elasticSeedMetrics = []struct {
	name   string
	of     func(ElasticMetrics) float64
	better func(a, b float64) bool
}{
	{"total time", func(m ElasticMetrics) float64 { return m.TotalTime }, func(a, b float64) bool { return a < b }},
	{"utilisation", func(m ElasticMetrics) float64 { return m.Utilization }, func(a, b float64) bool { return a > b }},
	{"weighted mean response", func(m ElasticMetrics) float64 { return m.WeightedMeanResponse }, func(a, b float64) bool { return a < b }},
	{"weighted mean completion", func(m ElasticMetrics) float64 { return m.WeightedMeanCompletion }, func(a, b float64) bool { return a < b }},
}

// Best returns, for each of the four metrics (total time, utilisation, weighted mean response,
// weighted mean completion), on how many seeds each strategy was best; strategies tied for
// best on a seed all count it.
func (r *ElasticSeeds) Best() [4]map[ElasticStrategy]int {
	var out [4]map[ElasticStrategy]int
	for k, mt := range elasticSeedMetrics {
		out[k] = map[ElasticStrategy]int{}
		for _, m := range r.Metrics {
			best := mt.of(m[r.Strategies[0]])
			for _, s := range r.Strategies[1:] {
				if v := mt.of(m[s]); mt.better(v, best) {
					best = v
				}
			}
			for _, s := range r.Strategies {
				if mt.of(m[s]) == best {
					out[k][s]++
				}
			}
		}
	}
	return out
}

// WriteElasticSeedsMarkdown writes every seed's figures, then each strategy's means and the
// number of seeds on which it was best.
func WriteElasticSeedsMarkdown(w io.Writer, r *ElasticSeeds) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n### Elastic scheduler: %d seeds of %d jobs submitted %v apart on %d slots, rescale gap %v\n\n",
		r.Command, len(r.Seeds), r.Jobs, r.SubmissionGap, r.Slots, r.RescaleGap)
	b.WriteString("Total time / utilisation / weighted mean response / weighted mean completion:\n\n| seed |")
	for _, s := range r.Strategies {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|--:|" + strings.Repeat("--:|", len(r.Strategies)) + "\n")
	for i, seed := range r.Seeds {
		fmt.Fprintf(&b, "| %d |", seed)
		for _, s := range r.Strategies {
			m := r.Metrics[i][s]
			fmt.Fprintf(&b, " %.0f / %.0f %% / %.0f / %.0f |", m.TotalTime, 100*m.Utilization, m.WeightedMeanResponse, m.WeightedMeanCompletion)
		}
		b.WriteString("\n")
	}
	best := r.Best()
	b.WriteString("\nMeans over the seeds, and on how many seeds each strategy was best (ties count for each):\n\n| strategy |")
	for _, mt := range elasticSeedMetrics {
		fmt.Fprintf(&b, " %s | best |", mt.name)
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|--:|", len(elasticSeedMetrics)) + "\n")
	n := float64(len(r.Metrics))
	for _, s := range r.Strategies {
		fmt.Fprintf(&b, "| %s |", s)
		for k, mt := range elasticSeedMetrics {
			var sum float64
			for _, m := range r.Metrics {
				sum += mt.of(m[s])
			}
			if k == 1 {
				fmt.Fprintf(&b, " %.1f %% | %d |", 100*sum/n, best[k][s])
			} else {
				fmt.Fprintf(&b, " %s | %d |", secs(sum/n), best[k][s])
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
