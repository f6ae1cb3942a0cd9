package sim

import (
	"encoding/json"
	"fmt"
	"image"
	"io"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
)

// ElasticExperiment is one run of the elastic experiment: a job set under every strategy at one
// submission and rescale gap, and, for generated job sets, sweeps of both gaps.
type ElasticExperiment struct {
	Options    ElasticOptions
	Strategies []ElasticStrategy
	// Jobs is the job set at SubmissionGap (a trace's, or a generated one).
	Jobs []ElasticJob
	// Workload says where the jobs come from.
	Workload string
	// Generate, when set, draws the job set of a submission gap for the sweep; without it (a
	// trace) there is no submission-gap sweep.
	Generate func(gap time.Duration) ([]ElasticJob, error)
	// SubmissionGaps and RescaleGaps are the sweeps' points.
	SubmissionGaps, RescaleGaps []time.Duration
}

// ElasticSweepPoint is every strategy's metrics at one gap.
type ElasticSweepPoint struct {
	Gap     time.Duration
	Metrics map[ElasticStrategy]ElasticMetrics
}

// ElasticReport is what the experiment prints.
type ElasticReport struct {
	Command, Workload string
	Slots             int
	Jobs              int
	RescaleGap        time.Duration
	Results           []*ElasticResult
	// BySubmissionGap sweeps the submission gap (rescale gap fixed), ByRescaleGap the rescale
	// gap (job set fixed; only elastic rescales, the others are there to compare).
	BySubmissionGap, ByRescaleGap []ElasticSweepPoint
}

// Run simulates every strategy, then the sweeps.
func (e *ElasticExperiment) Run(command string) (*ElasticReport, error) {
	rep := &ElasticReport{Command: command, Workload: e.Workload, Slots: e.Options.Slots, Jobs: len(e.Jobs), RescaleGap: e.Options.RescaleGap}
	for _, s := range e.Strategies {
		r, err := SimulateElastic(e.Jobs, s, e.Options)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		rep.Results = append(rep.Results, r)
	}
	if e.Generate != nil {
		for _, gap := range e.SubmissionGaps {
			jobs, err := e.Generate(gap)
			if err != nil {
				return nil, err
			}
			p, err := e.point(jobs, e.Options, gap, e.Strategies)
			if err != nil {
				return nil, err
			}
			rep.BySubmissionGap = append(rep.BySubmissionGap, p)
		}
	}
	for _, gap := range e.RescaleGaps {
		o := e.Options
		o.RescaleGap = gap
		p, err := e.point(e.Jobs, o, gap, e.Strategies)
		if err != nil {
			return nil, err
		}
		rep.ByRescaleGap = append(rep.ByRescaleGap, p)
	}
	return rep, nil
}

func (e *ElasticExperiment) point(jobs []ElasticJob, o ElasticOptions, gap time.Duration, strategies []ElasticStrategy) (ElasticSweepPoint, error) {
	p := ElasticSweepPoint{Gap: gap, Metrics: map[ElasticStrategy]ElasticMetrics{}}
	for _, s := range strategies {
		r, err := SimulateElastic(jobs, s, o)
		if err != nil {
			return p, fmt.Errorf("gap %v, %s: %w", gap, s, err)
		}
		p.Metrics[s] = r.Metrics
	}
	return p, nil
}

// WriteElasticJSON writes each strategy's metrics, keyed by strategy: totalTime, utilization,
// weightedMeanResponse, weightedMeanCompletion, makespan and overallResponse.
func WriteElasticJSON(w io.Writer, r *ElasticReport) error {
	out := make(map[ElasticStrategy]ElasticMetrics, len(r.Results))
	for _, res := range r.Results {
		out[res.Strategy] = res.Metrics
	}
	return writeIndentedJSON(w, out)
}

// writeIndentedJSON writes v as indented JSON.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteElasticMarkdown writes the experiment's table (the paper's Table 1), each job's fate
// under each strategy, and the sweeps.
func WriteElasticMarkdown(w io.Writer, r *ElasticReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n### Elastic scheduler: %d jobs (%s) on %d slots, rescale gap %v\n\n", r.Command, r.Jobs, r.Workload, r.Slots, r.RescaleGap)
	b.WriteString("| strategy | total time | utilisation | weighted mean response | weighted mean completion | makespan | mean response |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Results {
		m := res.Metrics
		fmt.Fprintf(&b, "| %s | %s | %.1f %% | %s | %s | %s | %s |\n", res.Strategy, secs(m.TotalTime), 100*m.Utilization,
			secs(m.WeightedMeanResponse), secs(m.WeightedMeanCompletion), secs(m.Makespan), secs(m.OverallResponse))
	}
	b.WriteString("\nJobs (submit, start, end in seconds; replicas at start; shrinks/expands):\n\n| job | type | priority | submit |")
	for _, res := range r.Results {
		fmt.Fprintf(&b, " %s |", res.Strategy)
	}
	b.WriteString("\n|---|---|--:|--:|" + strings.Repeat("---|", len(r.Results)) + "\n")
	if len(r.Results) > 0 {
		for i, j := range r.Results[0].Jobs {
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f |", j.Name, j.Type, j.Priority, j.Submit)
			for _, res := range r.Results {
				x := res.Jobs[i]
				fmt.Fprintf(&b, " %.0f–%.0f ×%d", x.Start, x.End, x.Replicas)
				if x.Shrinks+x.Expands > 0 {
					fmt.Fprintf(&b, " (−%d/+%d)", x.Shrinks, x.Expands)
				}
				b.WriteString(" |")
			}
			b.WriteString("\n")
		}
	}
	writeByPriority(&b, r.Results)
	writeSweep(&b, "submission gap", r.BySubmissionGap)
	writeSweep(&b, "rescale gap", r.ByRescaleGap)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeByPriority writes each strategy's mean completion (submit → end) of the jobs of each
// priority: what the priority-weighted mean is made of.
func writeByPriority(b *strings.Builder, results []*ElasticResult) {
	if len(results) == 0 {
		return
	}
	count := map[int32]int{}
	for _, j := range results[0].Jobs {
		count[j.Priority]++
	}
	b.WriteString("\nMean completion by priority (submit → end, s; the weighted mean weights priority p by p):\n\n| priority | jobs |")
	for _, res := range results {
		fmt.Fprintf(b, " %s |", res.Strategy)
	}
	b.WriteString("\n|--:|--:|" + strings.Repeat("--:|", len(results)) + "\n")
	for p := int32(ElasticMaxPriority); p >= ElasticMinPriority; p-- {
		if count[p] == 0 {
			continue
		}
		fmt.Fprintf(b, "| %d | %d |", p, count[p])
		for _, res := range results {
			var sum float64
			for _, j := range res.Jobs {
				if j.Priority == p {
					sum += j.End - j.Submit
				}
			}
			fmt.Fprintf(b, " %.0f |", sum/float64(count[p]))
		}
		b.WriteString("\n")
	}
}

func writeSweep(b *strings.Builder, what string, points []ElasticSweepPoint) {
	if len(points) == 0 {
		return
	}
	fmt.Fprintf(b, "\nBy %s: total time / utilisation / weighted mean response / weighted mean completion\n\n| %s |", what, what)
	strategies := sweepStrategies(points)
	for _, s := range strategies {
		fmt.Fprintf(b, " %s |", s)
	}
	b.WriteString("\n|--:|" + strings.Repeat("--:|", len(strategies)) + "\n")
	for _, p := range points {
		fmt.Fprintf(b, "| %v |", p.Gap)
		for _, s := range strategies {
			m := p.Metrics[s]
			fmt.Fprintf(b, " %.0f / %.0f %% / %.0f / %.0f |", m.TotalTime, 100*m.Utilization, m.WeightedMeanResponse, m.WeightedMeanCompletion)
		}
		b.WriteString("\n")
	}
}

// sweepStrategies lists the strategies of a sweep in the experiment's order.
func sweepStrategies(points []ElasticSweepPoint) []ElasticStrategy {
	var out []ElasticStrategy
	for _, s := range ElasticStrategies {
		if _, ok := points[0].Metrics[s]; ok {
			out = append(out, s)
		}
	}
	return out
}

// ElasticPlots are the experiment's charts, by file name.
func ElasticPlots(r *ElasticReport) (map[string]func(io.Writer) error, error) {
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("elastic plots: no results")
	}
	out := map[string]func(io.Writer) error{}
	usage := make([]plot.Series, len(r.Results))
	for i, res := range r.Results {
		s := plot.Series{Name: string(res.Strategy), Steps: true}
		for _, u := range res.Usage {
			s.X, s.Y = append(s.X, u.At), append(s.Y, float64(u.Used))
		}
		usage[i] = s
	}
	out["elastic-usage.png"] = func(w io.Writer) error {
		c := plot.NewCanvas(960, 520)
		ch := plot.Chart{Title: fmt.Sprintf("Replica slots in use (%d slots, %d jobs, rescale gap %v)", r.Slots, r.Jobs, r.RescaleGap),
			XLabel: "time (s)", YLabel: "slots", YMax: float64(r.Slots)}
		if err := ch.Draw(c, c.Bounds(), usage); err != nil {
			return err
		}
		return c.Encode(w)
	}
	for _, sw := range []struct {
		file, what string
		points     []ElasticSweepPoint
	}{{"elastic-submission-gap.png", "submission gap (s)", r.BySubmissionGap}, {"elastic-rescale-gap.png", "rescale gap (s)", r.ByRescaleGap}} {
		if len(sw.points) == 0 {
			continue
		}
		out[sw.file] = func(w io.Writer) error { return sweepPlot(w, sw.what, sw.points) }
	}
	return out, nil
}

// sweepPlot draws four panels, one per metric of the paper's table, against the swept gap.
func sweepPlot(w io.Writer, what string, points []ElasticSweepPoint) error {
	c := plot.NewCanvas(1200, 800)
	metrics := []struct {
		name string
		of   func(ElasticMetrics) float64
	}{
		{"total time (s)", func(m ElasticMetrics) float64 { return m.TotalTime }},
		{"utilisation (%)", func(m ElasticMetrics) float64 { return 100 * m.Utilization }},
		{"weighted mean response (s)", func(m ElasticMetrics) float64 { return m.WeightedMeanResponse }},
		{"weighted mean completion (s)", func(m ElasticMetrics) float64 { return m.WeightedMeanCompletion }},
	}
	for k, m := range metrics {
		var series []plot.Series
		for _, s := range sweepStrategies(points) {
			sr := plot.Series{Name: string(s)}
			for _, p := range points {
				sr.X, sr.Y = append(sr.X, p.Gap.Seconds()), append(sr.Y, m.of(p.Metrics[s]))
			}
			series = append(series, sr)
		}
		x, y := (k%2)*600, (k/2)*400
		if err := (plot.Chart{Title: m.name + " by " + what, XLabel: what}).Draw(c, image.Rect(x, y, x+600, y+400), series); err != nil {
			return err
		}
	}
	return c.Encode(w)
}
