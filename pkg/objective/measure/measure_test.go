package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// exporter serves a real client_golang registry, as a service's pods would.
func exporter(t *testing.T) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	p99 := prometheus.NewGauge(prometheus.GaugeOpts{Name: "http_p99_seconds", Help: "p99 latency"})
	p99.Set(0.0234)
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "http_requests_total", Help: "requests"})
	requests.Add(7)
	byPath := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "http_p99_by_path_seconds", Help: "p99 per path"}, []string{"path"})
	byPath.WithLabelValues("/").Set(0.01)
	byPath.WithLabelValues("/api").Set(0.02)
	reg.MustRegister(p99, requests, byPath)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv
}

func TestScrapePod(t *testing.T) {
	srv := exporter(t)
	ctx := context.Background()
	client := NewClient()
	got, err := ScrapePod(ctx, client, srv.URL+"/metrics", "http_p99_seconds")
	if err != nil || got != 0.0234 {
		t.Errorf("ScrapePod = %v, %v; want 0.0234", got, err)
	}
	for metric, want := range map[string]string{
		"http_p99":                 "no metric http_p99 among the 3 exposed",
		"http_requests_total":      "metric http_requests_total is a COUNTER, want a gauge",
		"http_p99_by_path_seconds": "metric http_p99_by_path_seconds has 2 series, want one",
	} {
		_, err := ScrapePod(ctx, client, srv.URL+"/metrics", metric)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("ScrapePod of %s: error %v, want one naming the URL and containing %q", metric, err, want)
		}
	}
}

func TestScrapePodRefusals(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/metrics", http.StatusFound) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE g gauge")
		pad := strings.Repeat("x", 1000)
		for i := 0; i*1000 < 2*MaxBodyBytes; i++ {
			fmt.Fprintf(w, "g{l=%q} 1\n", pad)
		}
	})
	mux.HandleFunc("/nan", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "# TYPE g gauge\ng NaN") })
	mux.HandleFunc("/garbage", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "g{ 1") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"/missing": "status 404 Not Found",
		"/moved":   "status 302 Found",
		"/nan":     "metric g is NaN, not a measurement",
		"/garbage": "not Prometheus text exposition",
	} {
		if _, err := ScrapePod(context.Background(), NewClient(), srv.URL+path, "g"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", path, err, want)
		}
	}
	if _, err := ScrapePod(context.Background(), NewClient(), srv.URL+"/huge", "g"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("/huge: error %v, want ErrTooLarge", err)
	}
}

func TestCombine(t *testing.T) {
	if v, err := Combine([]float64{0.01, 0.03, 0.02}, false); err != nil || v != 0.03 {
		t.Errorf("AtMost: %v, %v; want the worst pod, 0.03", v, err)
	}
	if v, err := Combine([]float64{100, 250, 50}, true); err != nil || v != 400 {
		t.Errorf("AtLeast: %v, %v; want the sum, 400", v, err)
	}
	if v, err := Combine(nil, true); err == nil || !math.IsNaN(v) {
		t.Errorf("no pods: %v, %v; want NaN and an error", v, err)
	}
}

func TestPodURL(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"10.0.0.7", "http://10.0.0.7:8080/metrics"},
		{"fd00::7", "http://[fd00::7]:8080/metrics"},
	} {
		if got := PodURL(tc.ip, 8080, "/metrics"); got != tc.want {
			t.Errorf("PodURL(%s) = %s, want %s", tc.ip, got, tc.want)
		}
	}
}

func FuzzParseGauge(f *testing.F) {
	f.Add("# HELP g p99\n# TYPE g gauge\ng 0.02\n", "g")
	f.Add("g{path=\"/\"} 1 1700000000000\n", "g")
	f.Add("# TYPE c counter\nc_total 3\n", "c_total")
	f.Add("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n", "h")
	f.Add("g{a=\"1\"} 1\ng{a=\"2\"} 2\n", "g")
	f.Fuzz(func(t *testing.T, text, metric string) {
		v, err := ParseGauge(strings.NewReader(text), metric)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("ParseGauge accepted %v", v)
		}
	})
}
