package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// percentile is the p-th percentile (0 < p ≤ 100, nearest rank) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// mean is the mean over a scheduler's complete rounds of one kind: pods per second, all pods
// and the steady part, and the scheduler's CPU milliseconds per bound pod.
type mean struct {
	rate, steady, cpuPerPod float64
	rounds                  int
}

func meanOf(rounds []*roundResult, kind, scheduler string) mean {
	var m mean
	for _, r := range rounds {
		if r.Kind == kind && r.Scheduler == scheduler && r.Bound == r.Pods {
			m.rate += r.Rate
			m.steady += r.Steady
			m.cpuPerPod += r.cpuPerPod()
			m.rounds++
		}
	}
	if m.rounds == 0 {
		return mean{rate: math.NaN(), steady: math.NaN(), cpuPerPod: math.NaN()}
	}
	n := float64(m.rounds)
	return mean{rate: m.rate / n, steady: m.steady / n, cpuPerPod: m.cpuPerPod / n, rounds: m.rounds}
}

// writeResults prints the results (a table, or JSON with -json) and saves them as JSON in the
// output directory.
func writeResults(w io.Writer, o *options, res *results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.outDir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("save the results: %w", err)
	}
	if o.json {
		_, err := fmt.Fprintf(w, "%s\n", data)
		return err
	}
	_, err = io.WriteString(w, table(res))
	return err
}

// table is the results as markdown.
func table(res *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d kwok nodes (%d NUMA nodes × %d CPUs), Ready %.0f s after creation; both schedulers at %g API requests/s, burst %d\n\n",
		res.Nodes, res.NUMAPerNode, res.CPUsPerNUMA, res.NodesReady, res.QPS, res.Burst)
	if len(res.Rounds) > 0 {
		b.WriteString("| kind | round | scheduler | pods bound | first bind | last bind | pods/s (start to last) | pods/s (10–90 %) | scheduler CPU | CPU per pod |\n|---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, r := range res.Rounds {
			fmt.Fprintf(&b, "| %s | %d | %s | %d / %d | %.2f s | %.2f s | %.0f | %.0f | %.1f s | %.2f ms |\n",
				r.Kind, r.Round, r.Scheduler, r.Bound, r.Pods, r.FirstBind, r.LastBind, r.Rate, r.Steady, r.CPU, r.cpuPerPod())
		}
		b.WriteString("\npods: pending pods, made before the scheduler starts, bound. job: a job of one-CPU workers submitted (an HPCJob for the placer, the pods made by the benchmark for kube-scheduler) until every worker is bound.\n")
		for _, kind := range []string{kindPods, kindJob} {
			p, k := meanOf(res.Rounds, kind, "placer"), meanOf(res.Rounds, kind, "kube-scheduler")
			if p.rounds+k.rounds == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s rounds, mean over complete ones: placer %.0f pods/s (10–90 %%: %.0f, %d rounds), kube-scheduler %.0f pods/s (10–90 %%: %.0f, %d rounds): placer / kube-scheduler = %.2f× (10–90 %%: %.2f×); scheduler CPU per bound pod: placer %.2f ms, kube-scheduler %.2f ms (%.1f× less)\n",
				kind, p.rate, p.steady, p.rounds, k.rate, k.steady, k.rounds, p.rate/k.rate, p.steady/k.steady, p.cpuPerPod, k.cpuPerPod, k.cpuPerPod/p.cpuPerPod)
		}
		for _, r := range res.Rounds {
			if r.Scheduler == "placer" && r.Annotated != r.Bound {
				fmt.Fprintf(&b, "placer %s round %d: %d of %d bound pods lack the NUMA node annotation\n", r.Kind, r.Round, r.Bound-r.Annotated, r.Bound)
			}
		}
	}
	if g := res.Gangs; g != nil {
		fmt.Fprintf(&b, "\n%d gangs of %d pods × %d exclusive CPUs compete for %d nodes (%d fit at once), each deleted %.0f s after it is bound:\n",
			g.Gangs, g.PodsPerGang, g.CPUsPerPod, g.Nodes, g.FitAtOnce, g.Hold)
		fmt.Fprintf(&b, "time to placement (last pod created to last pod bound) p50 %.2f s, p99 %.2f s, max %.2f s over %d placed gangs; first to last pod of a gang bound p50 %.2f s, p99 %.2f s; all placed %.1f s after the first was created\n",
			percentile(g.Wait, 50), percentile(g.Wait, 99), percentile(g.Wait, 100), len(g.Wait), percentile(g.Spread, 50), percentile(g.Spread, 99), g.Span)
	}
	return b.String()
}
