// Command gauge serves one Prometheus gauge whose value the caller sets: GET /metrics exposes it
// in the text format, PUT /value sets it (the body a decimal number). The e2e suite runs it in a
// pod of the worker image as the service a ServiceObjective holds to a target, so that the test
// decides when the objective is violated and when it is met. It exits 1 when it cannot listen.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	listen := flag.String("listen", ":9400", "address to serve on")
	name := flag.String("name", "e2e_latency_seconds", "the gauge's metric name")
	value := flag.Float64("value", 0, "the gauge's first value")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: newHandler(*name, *value), ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "gauge:", err)
		os.Exit(1)
	}
}

// newHandler serves the gauge name at /metrics, set to value and by PUT /value.
func newHandler(name string, value float64) http.Handler {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "The value the e2e test set."})
	g.Set(value)
	reg.MustRegister(g)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("PUT /value", func(w http.ResponseWriter, r *http.Request) {
		v, err := readValue(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g.Set(v)
		fmt.Fprintf(w, "%s %v\n", name, v)
	})
	return mux
}

// readValue reads a finite decimal number of at most 64 bytes.
func readValue(body io.Reader) (float64, error) {
	data, err := io.ReadAll(io.LimitReader(body, 65))
	if err != nil {
		return 0, err
	}
	if len(data) > 64 {
		return 0, errors.New("the value is longer than 64 bytes")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a finite number, not %q", data)
	}
	return v, nil
}
