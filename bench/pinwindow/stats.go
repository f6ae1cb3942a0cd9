package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// summary describes a set of durations.
type summary struct {
	N   int           `json:"n"`
	Min time.Duration `json:"minNs"`
	P50 time.Duration `json:"p50Ns"`
	P90 time.Duration `json:"p90Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
}

// summarize computes nearest-rank percentiles.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return summary{N: len(s), Min: s[0], P50: rank(50), P90: rank(90), P99: rank(99), Max: s[len(s)-1]}
}

// result is everything one run measured.
type result struct {
	Command string               `json:"command"`
	Node    string               `json:"node"`
	Runtime string               `json:"runtime"`
	Windows map[mode]summary     `json:"windows"`
	Samples map[mode][]pinSample `json:"samples"`
	// AgentWindows and AgentResolve are the agent's own account of the same pins (its log).
	AgentWindows map[mode]summary `json:"agentWindows"`
	AgentResolve map[mode]summary `json:"agentResolve"`
	Drift        summary          `json:"drift"`
	IdleCPU      float64          `json:"idleCPUShare"`
	IdleFor      time.Duration    `json:"idleForNs"`
	RSSBytes     int64            `json:"rssBytes"`
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// writeTable prints the result for people.
func writeTable(w io.Writer, r result, modes []mode) error {
	if _, err := fmt.Fprintf(w, "node %s, runtime %s\n", r.Node, r.Runtime); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "unpinned window (cgroup created -> pinned cpuset written)\tpods\tmin\tp50\tp90\tp99\tmax\t\n")
	for _, m := range modes {
		s := r.Windows[m]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", m, s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
	}
	for _, m := range modes {
		if s := r.AgentWindows[m]; s.N > 0 {
			fmt.Fprintf(tw, "  agent's own window, %s (event -> write)\t%d\t%s\t%s\t%s\t%s\t%s\t\n", m, s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
		}
		if s := r.AgentResolve[m]; s.N > 0 && s.Max > 0 {
			fmt.Fprintf(tw, "  of which CRI name lookup, %s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", m, s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
		}
	}
	if r.Drift.N > 0 {
		s := r.Drift
		fmt.Fprintf(tw, "drift repair (cpuset rewritten -> pin back)\t%d\t%s\t%s\t%s\t%s\t%s\t\n", s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
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
