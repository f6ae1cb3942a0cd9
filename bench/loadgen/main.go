// Command loadgen sends HTTP GETs to a URL on a fixed-rate, open-loop schedule that follows a
// load trace, and writes what it saw as JSON: per second the offered rate, the requests offered,
// achieved and failed, and p50/p99/max latency; and a summary. Every request's latency runs from
// its scheduled send time, so a stall of the service counts against every request that should
// have been sent during it (no coordinated omission; internal/loadgen).
//
//	loadgen -url http://10.0.0.5:8080/work -trace 60s@50,120s@200,60s@50 -o run.json
//	loadgen -url ... -trace-file trace.txt     # lines "DURATION RATE", or a JSON array
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

type options struct {
	url         string
	trace       loadgen.Trace
	timeout     time.Duration
	maxInFlight int
	out         string
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "", "URL to GET (required)")
	traceFlag := fs.String("trace", "", "load trace: comma-separated DURATION@RATE steps in requests per second, e.g. 60s@50,2m@200")
	traceFile := fs.String("trace-file", "", "load trace file: lines \"DURATION RATE\" or a JSON array of {\"duration\",\"rate\"} (instead of -trace)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "limit of one request from its send; past it the request is an error")
	fs.IntVar(&o.maxInFlight, "max-inflight", 20000, "requests outstanding at once; one scheduled beyond it is not sent and counts as an error")
	fs.StringVar(&o.out, "o", "-", "where the JSON report goes (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.url == "" {
		return o, errors.New("-url is required")
	}
	var err error
	switch {
	case (*traceFlag == "") == (*traceFile == ""):
		return o, errors.New("give the load trace with exactly one of -trace and -trace-file")
	case *traceFlag != "":
		o.trace, err = loadgen.ParseTrace(*traceFlag)
	default:
		var f *os.File
		if f, err = os.Open(*traceFile); err == nil {
			o.trace, err = loadgen.ReadTrace(f)
			f.Close()
		}
	}
	if err != nil {
		return o, fmt.Errorf("load trace: %w", err)
	}
	if o.timeout <= 0 || o.maxInFlight <= 0 {
		return o, errors.New("-timeout and -max-inflight must be positive")
	}
	return o, nil
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	do, err := loadgen.HTTPGet(loadgen.NewHTTPClient(o.maxInFlight), o.url)
	if err != nil {
		return err
	}
	opts := loadgen.DefaultOptions(o.trace)
	opts.Timeout, opts.MaxInFlight = o.timeout, o.maxInFlight
	fmt.Fprintf(stderr, "loadgen: %s of load on %s\n", o.trace.Duration(), o.url)
	rep, err := loadgen.Run(ctx, opts, do)
	if err != nil {
		return err
	}
	w := stdout
	if o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write report %s: %w", o.out, err)
	}
	s := rep.Summary
	fmt.Fprintf(stderr, "loadgen: %d requests (%.1f/s offered, %.1f/s achieved), %d errors, p50 %.2f ms, p99 %.2f ms, max %.2f ms, generator lag at most %.2f ms\n",
		s.Requests, s.OfferedRate, s.AchievedRate, s.Errors, s.P50Seconds*1e3, s.P99Seconds*1e3, s.MaxSeconds*1e3, s.MaxSendLagSeconds*1e3)
	return nil
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
