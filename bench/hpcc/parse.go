package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
)

// report is what parse prints for one input: every run, in order.
type report struct {
	Source string      `json:"source"`
	Runs   []runReport `json:"runs"`
}

// runReport is one run: where its summary is, the headline (null when a figure is missing) and,
// for a run that did not succeed, why; then every key of the summary.
type runReport struct {
	Run      int            `json:"run"`
	Line     int            `json:"line"`
	Setup    string         `json:"setup,omitempty"`
	Problem  string         `json:"problem,omitempty"`
	Headline *hpcc.Headline `json:"headline"`
	Summary  hpcc.Summary   `json:"summary"`
}

func runParse(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hpcc parse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: hpcc parse [-o table|json] [-allow-failure] [FILE]\n\n"+
			"FILE (or stdin without it, or with -) is an hpccoutf.txt or any text holding one.\n\nflags:\n")
		fs.PrintDefaults()
	}
	output := fs.String("o", "table", "output: table (the headline of each run) or json (headline and every summary key of each run)")
	allowFailure := fs.Bool("allow-failure", false, "print runs that did not succeed (Success other than 1, or a headline figure missing) instead of failing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "hpcc parse: -o %q: want table or json\n", *output)
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "hpcc parse: %d inputs given: give one file, or none to read stdin\n", fs.NArg())
		return 2
	}
	source, in := "stdin", stdin
	if name := fs.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "hpcc parse: %v\n", err)
			return 1
		}
		defer f.Close()
		source, in = name, f
	}
	rep, err := read(in, source)
	if err != nil {
		fmt.Fprintf(stderr, "hpcc parse: %v\n", err)
		return 1
	}
	if failed := rep.failures(); len(failed) > 0 && !*allowFailure {
		for _, f := range failed {
			fmt.Fprintf(stderr, "hpcc parse: %s\n", f)
		}
		fmt.Fprintln(stderr, "hpcc parse: -allow-failure prints these runs anyway")
		return 1
	}
	if *output == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hpcc parse: write the report: %v\n", err)
		return 1
	}
	return 0
}

// read parses every summary in r and judges each run.
func read(r io.Reader, source string) (report, error) {
	sums, err := hpcc.Parse(r)
	if errors.Is(err, hpcc.ErrNoSummary) {
		return report{}, fmt.Errorf("%s: %w; HPCC writes the summary at the end of hpccoutf.txt, in rank 0's working directory", source, err)
	}
	if err != nil {
		return report{}, fmt.Errorf("%s: %w", source, err)
	}
	rep := report{Source: source}
	for i, s := range sums {
		run := runReport{Run: i + 1, Line: s.Line, Setup: s.Setup(), Summary: s}
		h, err := s.Headline()
		switch {
		case err != nil:
			run.Problem = err.Error()
		case !h.Success:
			v, _ := s.Value(hpcc.KeySuccess)
			run.Problem = fmt.Sprintf("%s=%s: HPCC reports a test that failed its verification (look for FAILED or ERROR in hpccoutf.txt); the figures may be wrong", hpcc.KeySuccess, v)
		}
		if err == nil {
			run.Headline = &h
		}
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

// failures says which runs did not succeed, and why.
func (rep report) failures() []string {
	var out []string
	for _, r := range rep.Runs {
		if r.Problem != "" {
			out = append(out, fmt.Sprintf("%s: run %d of %d (summary at line %d): %s", rep.Source, r.Run, len(rep.Runs), r.Line, r.Problem))
		}
	}
	return out
}

func writeJSON(w io.Writer, rep report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints each run's headline as HPCC wrote the values, n/a and why for a figure HPCC
// did not measure.
func writeTable(w io.Writer, rep report) error {
	var b strings.Builder
	for i, r := range rep.Runs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s, run %d of %d (summary at line %d)", rep.Source, r.Run, len(rep.Runs), r.Line)
		if r.Setup != "" {
			fmt.Fprintf(&b, ": %s", r.Setup)
		}
		b.WriteByte('\n')
		if r.Headline == nil {
			fmt.Fprintf(&b, "  no headline: %s\n", r.Problem)
			continue
		}
		tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  benchmark\tHPCC key\tvalue\tunit")
		for _, f := range r.Headline.Figures() {
			v, _ := r.Summary.Value(f.Key)
			unit := f.Unit
			if !f.Measured {
				v, unit = "n/a", f.Note
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Benchmark, f.Key, v, unit)
		}
		v, _ := r.Summary.Value(hpcc.KeySuccess)
		verdict := "every test passed its verification"
		if !r.Headline.Success {
			verdict = "FAILED: " + r.Problem
		}
		fmt.Fprintf(tw, "  verdict\t%s\t%s\t%s\n", hpcc.KeySuccess, v, verdict)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
