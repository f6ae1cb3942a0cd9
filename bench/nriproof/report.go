package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
)

// summary is the part of an agentbench.Summary this bench reports.
type summary struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
}

func summarize(ds []time.Duration) summary {
	s := agentbench.Summarize(ds)
	return summary{N: s.N, P50: s.P50, P99: s.P99, Max: s.Max}
}

// modeResult is one mode's samples and their summaries.
type modeResult struct {
	Pods int `json:"pods"`
	// PinnedAtInit counts workers whose first affinity reading was their pin; Measured those
	// whose reading and pin were both read.
	PinnedAtInit int `json:"pinnedAtInit"`
	Measured     int `json:"measured"`
	// SpecPinned counts workers whose runtime spec held their pin; SpecRead those whose spec was
	// read.
	SpecPinned int `json:"specPinned"`
	SpecRead   int `json:"specRead"`
	// Vias counts the agent's account of how each pin was made.
	Vias            map[string]int `json:"vias"`
	Window          summary        `json:"window"`
	Hook            summary        `json:"hook"`
	CreateContainer summary        `json:"createContainer"`
	Samples         []sample       `json:"samples"`
}

func summarizeMode(samples []sample) modeResult {
	r := modeResult{Pods: len(samples), Vias: map[string]int{}, Samples: samples}
	var window, hook, create []time.Duration
	for _, s := range samples {
		if s.Error != "" {
			continue
		}
		r.Measured++
		if s.PinnedAtInit {
			r.PinnedAtInit++
		}
		if s.SpecRead {
			r.SpecRead++
			if s.SpecPinned {
				r.SpecPinned++
			}
		}
		if s.Via != "" {
			r.Vias[s.Via]++
			window = append(window, s.Window)
		}
		if s.Hook > 0 {
			hook = append(hook, s.Hook)
		}
		if s.CreateContainer > 0 {
			create = append(create, s.CreateContainer)
		}
	}
	r.Window, r.Hook, r.CreateContainer = summarize(window), summarize(hook), summarize(create)
	return r
}

// result is everything one run measured.
type result struct {
	Command string              `json:"command"`
	Node    string              `json:"node"`
	Modes   map[mode]modeResult `json:"modes"`
}

// writeTable prints the result for people.
func writeTable(w io.Writer, r result, modes []mode) error {
	us, ms := agentbench.Micros, agentbench.Millis
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tWORKERS\tFIRST AFFINITY = PIN\tRUNTIME SPEC = PIN\tAGENT'S ACCOUNT\tUNPINNED WINDOW p50 / p99 / max\tNRI HOOK p50 / p99\tCREATECONTAINER p50 / p99")
	for _, m := range modes {
		mr := r.Modes[m]
		hook := "-"
		if mr.Hook.N > 0 {
			hook = us(mr.Hook.P50) + " / " + us(mr.Hook.P99)
		}
		create := "-"
		if mr.CreateContainer.N > 0 {
			create = ms(mr.CreateContainer.P50) + " / " + ms(mr.CreateContainer.P99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d of %d\t%d of %d\t%v\t%s / %s / %s\t%s\t%s\n", m, mr.Pods, mr.PinnedAtInit, mr.Measured, mr.SpecPinned, mr.SpecRead, mr.Vias,
			ms(mr.Window.P50), ms(mr.Window.P99), ms(mr.Window.Max), hook, create)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	nri, inotify := r.Modes[modeNRI], r.Modes[modeInotify]
	if nri.CreateContainer.N > 0 && inotify.CreateContainer.N > 0 {
		_, err := fmt.Fprintf(w, "CreateContainer with the plugin minus without (p50): %s\n", ms(nri.CreateContainer.P50-inotify.CreateContainer.P50))
		return err
	}
	return nil
}
