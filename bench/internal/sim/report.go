package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Report is what the simulator prints: every scenario's result.
type Report struct {
	// Command is how the report was produced, for the reader to rerun it.
	Command   string            `json:"command"`
	Scenarios []*ScenarioResult `json:"scenarios"`
	// AcrossSeeds sums up scenarios that differ only in the workload's seed (SummarizeSeeds).
	AcrossSeeds []AcrossSeeds `json:"acrossSeeds,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes one table per scenario: per strategy the jobs finished and rejected, the
// response time (mean, p50, p95), the wait (mean, p95), makespan, utilisation, mean stretch
// overall and per profile, and the change in mean response time and makespan against the
// baseline; then the across-seeds summary, if any.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	if r.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	}
	for i, sc := range r.Scenarios {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %d × %s (%d CPUs), %d jobs: %s\n\n", sc.Nodes, sc.Machine, sc.CPUs, sc.Jobs, sc.Workload)
		b.WriteString("| strategy | done | rejected | response mean | p50 | p95 | wait mean | wait p95 | makespan | utilisation | stretch | stretch cpu / memory / network | response vs " + sc.Baseline + " | makespan vs " + sc.Baseline + " |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, s := range sc.Strategies {
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.0f %% | %.2f | %s | %s | %s |\n",
				s.Strategy, s.Finished, s.Rejected, secs(s.Response.Mean), secs(s.Response.P50), secs(s.Response.P95),
				secs(s.Wait.Mean), secs(s.Wait.P95), secs(s.Makespan), 100*s.Utilisation, s.Stretch,
				profiles(s.StretchByProfile), change(s.ResponseRatio), change(s.MakespanRatio))
		}
		timedOut := []string{}
		for _, s := range sc.Strategies {
			if s.TimedOut > 0 {
				timedOut = append(timedOut, fmt.Sprintf("%s %d", s.Strategy, s.TimedOut))
			}
		}
		if len(timedOut) > 0 {
			fmt.Fprintf(&b, "\nJobs that waited longer than their gang timeout (they stay queued, as in the placer): %s.\n", strings.Join(timedOut, ", "))
		}
		refused := []string{}
		for _, s := range sc.Strategies {
			if s.AgentRefusals > 0 {
				refused = append(refused, fmt.Sprintf("%s %d", s.Strategy, s.AgentRefusals))
			}
		}
		if len(refused) > 0 {
			fmt.Fprintf(&b, "\nPlans the placer accepted but a node's allocator refused (undone and requeued): %s.\n", strings.Join(refused, ", "))
		}
	}
	writeSeeds(&b, r.AcrossSeeds)
	_, err := io.WriteString(w, b.String())
	return err
}

func secs(s float64) string { return fmt.Sprintf("%.0f s", s) }

// change prints a ratio as a signed percentage ("-35.0 %"), or "–" without a baseline.
func change(ratio float64) string {
	if ratio == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f %%", 100*(ratio-1))
}

func profiles(m map[v1alpha1.Profile]float64) string {
	parts := make([]string, 0, len(genProfiles))
	for _, p := range genProfiles {
		if v, ok := m[p]; ok {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		} else {
			parts = append(parts, "–")
		}
	}
	return strings.Join(parts, " / ")
}
