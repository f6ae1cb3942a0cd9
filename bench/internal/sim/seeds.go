package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Spread is the mean, smallest and largest of one figure over several workloads.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// AcrossSeeds sums up one strategy on one cluster over workloads drawn with several seeds.
type AcrossSeeds struct {
	Machine  string `json:"machine"`
	Nodes    int    `json:"nodes"`
	Strategy string `json:"strategy"`
	Baseline string `json:"baseline"`
	Seeds    int    `json:"seeds"`
	// ResponseRatio and MakespanRatio spread the strategy's ratios to the baseline.
	ResponseRatio Spread `json:"responseRatio"`
	MakespanRatio Spread `json:"makespanRatio"`
}

// SummarizeSeeds groups scenarios by machine and node count (in order of first appearance) and
// spreads each strategy's ratios over the scenarios of a group; groups of one scenario are left
// out.
func SummarizeSeeds(scenarios []*ScenarioResult) []AcrossSeeds {
	type key struct {
		machine string
		nodes   int
	}
	var order []key
	groups := map[key][]*ScenarioResult{}
	for _, sc := range scenarios {
		k := key{sc.Machine, sc.Nodes}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], sc)
	}
	var out []AcrossSeeds
	for _, k := range order {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		for i, s := range g[0].Strategies {
			a := AcrossSeeds{Machine: k.machine, Nodes: k.nodes, Strategy: s.Strategy, Baseline: g[0].Baseline, Seeds: len(g)}
			var resp, mk []float64
			for _, sc := range g {
				resp = append(resp, sc.Strategies[i].ResponseRatio)
				mk = append(mk, sc.Strategies[i].MakespanRatio)
			}
			a.ResponseRatio, a.MakespanRatio = spread(resp), spread(mk)
			out = append(out, a)
		}
	}
	return out
}

func spread(v []float64) Spread {
	s := Spread{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		s.Mean += x / float64(len(v))
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	return s
}

// writeSeeds prints the across-seeds tables.
func writeSeeds(w io.Writer, all []AcrossSeeds) {
	var b strings.Builder
	for i, a := range all {
		if i == 0 || all[i-1].Machine != a.Machine || all[i-1].Nodes != a.Nodes {
			fmt.Fprintf(&b, "\n### %d × %s over %d seeds: change against %s, mean (min … max)\n\n", a.Nodes, a.Machine, a.Seeds, a.Baseline)
			b.WriteString("| strategy | response time | makespan |\n|---|--:|--:|\n")
		}
		fmt.Fprintf(&b, "| %s | %s (%s … %s) | %s (%s … %s) |\n", a.Strategy,
			change(a.ResponseRatio.Mean), change(a.ResponseRatio.Min), change(a.ResponseRatio.Max),
			change(a.MakespanRatio.Mean), change(a.MakespanRatio.Min), change(a.MakespanRatio.Max))
	}
	_, _ = io.WriteString(w, b.String())
}
