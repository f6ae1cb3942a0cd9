// Command cpuservice is the data-centre service of issue 20's e2e test and benchmark: a
// CPU-bound HTTP handler whose latency depends on the CPU it is given. GET /work hashes a 4 KiB
// buffer -work times with SHA-256 (a fixed amount of CPU work per request, the same on every
// run) and answers the digest; every request runs in its own goroutine, so requests that find
// the CPUs busy wait, as a real service's do. GET /metrics serves, in the Prometheus text format,
// the histogram cpuservice_request_duration_seconds of /work's latency (for PromQL and
// autoscalers), the gauge cpuservice_request_duration_p99_seconds — the p99 of the requests that
// finished in the last -window, which a ServiceObjective's pods source reads — and
// cpuservice_requests_in_flight; /healthz answers ok. It runs in the worker image
// (localhost/finegrain-worker:dev, /usr/local/bin/cpuservice) and exits 1 when it cannot listen.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxWork bounds -work (hashes per request).
const maxWork = 10_000_000

// maxWindowSamples bounds the latencies kept for the p99 gauge; past it the oldest go.
const maxWindowSamples = 200_000

type options struct {
	listen string
	work   int
	window time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("cpuservice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", ":8080", "address to serve on")
	fs.IntVar(&o.work, "work", 2000, "SHA-256 hashes of a 4 KiB buffer per /work request (the request's CPU cost)")
	fs.DurationVar(&o.window, "window", 10*time.Second, "the p99 gauge covers the requests that finished in this last stretch of time")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.work < 1 || o.work > maxWork:
		return o, fmt.Errorf("-work %d: want 1 to %d hashes per request", o.work, maxWork)
	case o.window < time.Second:
		return o, fmt.Errorf("-window %s: want at least 1s", o.window)
	}
	return o, nil
}

// service is the handler and its metrics.
type service struct {
	work     int
	window   time.Duration
	now      func() time.Time
	hist     prometheus.Histogram
	inFlight prometheus.Gauge

	mu     sync.Mutex
	recent []sample
}

type sample struct {
	done    time.Time
	latency time.Duration
}

func newService(o options, now func() time.Time) (*service, *prometheus.Registry) {
	s := &service{work: o.work, window: o.window, now: now}
	s.hist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cpuservice_request_duration_seconds",
		Help:    "Latency of /work requests, from arrival to answer.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	s.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cpuservice_requests_in_flight",
		Help: "/work requests being served.",
	})
	p99 := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cpuservice_request_duration_p99_seconds",
		Help: "p99 latency of the /work requests that finished in the last window (0 when none did).",
	}, s.p99)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.hist, s.inFlight, p99)
	return s, reg
}

func (s *service) handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", s.serveWork)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

func (s *service) serveWork(w http.ResponseWriter, _ *http.Request) {
	start := s.now()
	s.inFlight.Inc()
	sum := burn(s.work)
	s.inFlight.Dec()
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintln(w, hex.EncodeToString(sum[:]))
	s.observe(start, s.now())
}

// burn hashes a 4 KiB buffer n times, each round over the last digest: CPU work the compiler
// cannot skip.
func burn(n int) [sha256.Size]byte {
	var buf [4096]byte
	var sum [sha256.Size]byte
	for i := 0; i < n; i++ {
		copy(buf[:], sum[:])
		sum = sha256.Sum256(buf[:])
	}
	return sum
}

func (s *service) observe(start, done time.Time) {
	lat := done.Sub(start)
	s.hist.Observe(lat.Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent = append(s.recent, sample{done: done, latency: lat})
	if len(s.recent) > maxWindowSamples {
		s.recent = slices.Delete(s.recent, 0, len(s.recent)-maxWindowSamples)
	}
}

// p99 is the nearest-rank p99 of the requests that finished in the last window.
func (s *service) p99() float64 {
	cutoff := s.now().Add(-s.window)
	s.mu.Lock()
	i := 0
	for i < len(s.recent) && s.recent[i].done.Before(cutoff) {
		i++
	}
	s.recent = slices.Delete(s.recent, 0, i)
	lats := make([]time.Duration, len(s.recent))
	for j, r := range s.recent {
		lats[j] = r.latency
	}
	s.mu.Unlock()
	if len(lats) == 0 {
		return 0
	}
	slices.Sort(lats)
	k := (len(lats)*99 + 99) / 100
	return lats[max(k, 1)-1].Seconds()
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuservice:", err)
		os.Exit(2)
	}
	s, reg := newService(o, time.Now)
	srv := &http.Server{Addr: o.listen, Handler: s.handler(reg), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(os.Stderr, "cpuservice: serving on %s, %d hashes per request\n", o.listen, o.work)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "cpuservice:", err)
		os.Exit(1)
	}
}
