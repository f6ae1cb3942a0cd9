package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
)

// result is everything one run measured.
type result struct {
	Command string                      `json:"command"`
	Node    string                      `json:"node"`
	Runtime string                      `json:"runtime"`
	Windows map[mode]agentbench.Summary `json:"windows"`
	Samples map[mode][]pinSample        `json:"samples"`
	// AgentWindows and AgentResolve are the agent's own account of the same pins (its log).
	AgentWindows map[mode]agentbench.Summary `json:"agentWindows"`
	AgentResolve map[mode]agentbench.Summary `json:"agentResolve"`
	Drift        agentbench.Summary          `json:"drift"`
	IdleCPU      float64                     `json:"idleCPUShare"`
	IdleFor      time.Duration               `json:"idleForNs"`
	RSSBytes     int64                       `json:"rssBytes"`
}

// writeTable prints the result for people.
func writeTable(w io.Writer, r result, modes []mode) error {
	if _, err := fmt.Fprintf(w, "node %s, runtime %s\n", r.Node, r.Runtime); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "unpinned window (cgroup created -> pinned cpuset written)\tpods\tmin\tp50\tp90\tp99\tmax\t\n")
	for _, m := range modes {
		writeRow(tw, string(m), r.Windows[m])
	}
	for _, m := range modes {
		if s := r.AgentWindows[m]; s.N > 0 {
			writeRow(tw, fmt.Sprintf("  agent's own window, %s (event -> write)", m), s)
		}
		if s := r.AgentResolve[m]; s.N > 0 && s.Max > 0 {
			writeRow(tw, fmt.Sprintf("  of which CRI name lookup, %s", m), s)
		}
	}
	if r.Drift.N > 0 {
		writeRow(tw, "drift repair (cpuset rewritten -> pin back)", r.Drift)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.IdleFor > 0 {
		_, err := fmt.Fprintf(w, "agent idle: %.3f %% of one CPU over %s, RSS %.1f MiB\n", 100*r.IdleCPU, r.IdleFor, float64(r.RSSBytes)/(1<<20))
		return err
	}
	return nil
}

// writeRow prints one summary as a row of the table: its label, count and percentiles.
func writeRow(w io.Writer, label string, s agentbench.Summary) {
	ms := agentbench.Millis
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", label, s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
}
