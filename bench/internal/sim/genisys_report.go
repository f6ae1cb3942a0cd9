package sim

import (
	"fmt"
	"image"
	"io"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
)

// WriteGenisysJSON writes one object per scenario (Dedicated, Unmanaged, …) with the keys of
// GenisysResult: totalTime, normalizedTotalTime, makespan, utilization, the steps' normalised
// times and the services' violation seconds.
func WriteGenisysJSON(w io.Writer, r *GenisysReport) error {
	out := make(map[string]*GenisysResult, len(r.Results))
	for _, res := range r.Results {
		out[res.Scenario] = res
	}
	return writeIndentedJSON(w, out)
}

// WriteGenisysMarkdown writes the workload, the scenarios' table and each step's normalised time
// under each scenario.
func WriteGenisysMarkdown(w io.Writer, r *GenisysReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n### Genisys, %s workload (seed %d) on %d nodes of %s\n\n", r.Command, r.Workload, r.Seed, GenisysNodes, r.Machine)
	b.WriteString("Services (latency target, mean load ± swing):")
	for _, s := range r.Services {
		fmt.Fprintf(&b, " %s %.0f ms, %.0f req/s × %.0f ms ± %.0f %%;", s.Name, 1000*s.Target, s.MeanRate, 1000*s.Work, 100*s.Amplitude)
	}
	b.WriteString("\nJobs (submit; steps tasks × runtime):")
	for _, j := range r.Jobs {
		fmt.Fprintf(&b, " %s %.0f s:", j.Name, j.Submit.Seconds())
		for _, s := range j.Steps {
			fmt.Fprintf(&b, " %d×%.0f", s.Tasks, s.Runtime.Seconds())
		}
		b.WriteString(";")
	}
	b.WriteString("\n\n| scenario | total time | vs dedicated | makespan | utilisation | mean step time (norm.) | max step time (norm.) | service violation | of it > 110 % | latency / target | pending pods |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %.3f | %s | %.1f %% | %.3f | %.3f | %s | %s | %.2f | %d |\n", res.Scenario, secs(res.TotalTime), res.NormalizedTotalTime,
			secs(res.Makespan), 100*res.Utilization, res.MeanNormalizedStepTime, res.MaxNormalizedStepTime, secs(res.ServiceViolationSeconds),
			secs(res.SevereViolationSeconds), res.MeanLatencyRatio, res.PendingPods)
	}
	b.WriteString("\nSteps: execution time / turnaround (submit → end) over the dedicated cluster's (start–end in seconds):\n\n| step | tasks |")
	for _, res := range r.Results {
		fmt.Fprintf(&b, " %s |", res.Scenario)
	}
	b.WriteString("\n|---|--:|" + strings.Repeat("---|", len(r.Results)) + "\n")
	if len(r.Results) > 0 {
		for i, s := range r.Results[0].Steps {
			fmt.Fprintf(&b, "| %s | %d |", s.Name, s.Tasks)
			for _, res := range r.Results {
				x := res.Steps[i]
				fmt.Fprintf(&b, " %.3f / %.2f (%.0f–%.0f) |", x.NormalizedTime, x.NormalizedTurnaround, x.Start, x.End)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// GenisysPlots are the workload's charts, by file name: the CPU utilisation over time of the five
// shared nodes under every scenario but Dedicated, and each step's normalised execution time and
// turnaround under every scenario.
func GenisysPlots(r *GenisysReport) (map[string]func(io.Writer) error, error) {
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("genisys plots: no results")
	}
	var usage, steps, turnaround []plot.Series
	for _, res := range r.Results {
		// Dedicated's utilisation is its Slurm cluster's: not the same CPUs as the others'.
		if res.Scenario != GenisysDedicated {
			u := plot.Series{Name: res.Scenario}
			for _, s := range res.Samples {
				u.X, u.Y = append(u.X, s.At), append(u.Y, 100*s.Utilization)
			}
			usage = append(usage, u)
		}
		st, ta := plot.Series{Name: res.Scenario}, plot.Series{Name: res.Scenario}
		for i, s := range res.Steps {
			st.X, st.Y = append(st.X, float64(i+1)), append(st.Y, s.NormalizedTime)
			ta.X, ta.Y = append(ta.X, float64(i+1)), append(ta.Y, s.NormalizedTurnaround)
		}
		steps, turnaround = append(steps, st), append(turnaround, ta)
	}
	prefix := "genisys-" + r.Workload
	return map[string]func(io.Writer) error{
		prefix + "-utilization.png": func(w io.Writer) error {
			return drawChart(w, plot.Chart{Title: fmt.Sprintf("CPU utilisation, %s workload (seed %d)", r.Workload, r.Seed),
				XLabel: "time (s)", YLabel: "% of CPUs busy", YMax: 100}, usage)
		},
		prefix + "-steps.png": func(w io.Writer) error {
			x := "step (jobs in submission order, then their steps)"
			return drawCharts(w,
				chartOf{plot.Chart{Title: fmt.Sprintf("Step execution time over dedicated, %s workload (seed %d)", r.Workload, r.Seed), XLabel: x, YLabel: "normalised time"}, steps},
				chartOf{plot.Chart{Title: "Step turnaround (submit to end) over dedicated", XLabel: x, YLabel: "normalised turnaround"}, turnaround})
		},
	}, nil
}

// chartOf is one chart and its series.
type chartOf struct {
	chart  plot.Chart
	series []plot.Series
}

func drawChart(w io.Writer, ch plot.Chart, series []plot.Series) error {
	return drawCharts(w, chartOf{ch, series})
}

// drawCharts draws the charts one above the other, 960 × 520 each.
func drawCharts(w io.Writer, charts ...chartOf) error {
	c := plot.NewCanvas(960, 520*len(charts))
	for i, ch := range charts {
		if err := ch.chart.Draw(c, image.Rect(0, 520*i, 960, 520*(i+1)), ch.series); err != nil {
			return err
		}
	}
	return c.Encode(w)
}
