package inspect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/finegrain-dev/finegrain/pkg/metrics"
	"github.com/finegrain-dev/finegrain/pkg/report"
)

type staticSource struct{ snap report.Snapshot }

func (s staticSource) Snapshot() report.Snapshot { return s.snap }
func (staticSource) Changed() <-chan struct{}    { return nil }

func newServer(t *testing.T, ready error) (*Server, Pins) {
	t.Helper()
	_, s := snapshot(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewState(staticSource{s}, report.Options{WholeCores: true}))
	view := FromSnapshot("node-a", SourceAgent, s, report.Options{WholeCores: true})
	srv, err := New(Config{
		Address:  "127.0.0.1:0",
		Gatherer: reg,
		Pins:     func() Pins { return view },
		Health:   []Check{{"agent-loop", func(context.Context) error { return nil }}},
		Ready: []Check{
			{"startup-reconcile", func(context.Context) error { return nil }},
			{"kubelet-policy", func(context.Context) error { return ready }},
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, view
}

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String()
}

func TestServerEndpoints(t *testing.T) {
	srv, view := newServer(t, nil)
	h := srv.Handler()

	code, body := get(t, h, http.MethodGet, PathMetrics)
	if code != http.StatusOK || !strings.Contains(body, `finegrain_nodeagent_free_cpus{numa_node="1"} 2`) {
		t.Errorf("GET /metrics = %d:\n%s", code, body)
	}
	code, body = get(t, h, http.MethodGet, PathHealthz)
	if code != http.StatusOK || body != "[+]agent-loop ok\nok\n" {
		t.Errorf("GET /healthz = %d %q", code, body)
	}
	code, body = get(t, h, http.MethodGet, PathReadyz)
	if code != http.StatusOK || body != "[+]startup-reconcile ok\n[+]kubelet-policy ok\nok\n" {
		t.Errorf("GET /readyz = %d %q", code, body)
	}
	code, body = get(t, h, http.MethodGet, PathPins)
	if code != http.StatusOK {
		t.Fatalf("GET /pins = %d %s", code, body)
	}
	got, err := DecodePins([]byte(body), "test")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(view, got); d != "" {
		t.Errorf("/pins differs from the view (-want +got):\n%s", d)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if code, _ := get(t, h, m, PathPins); code != http.StatusMethodNotAllowed {
			t.Errorf("%s /pins = %d, want 405", m, code)
		}
	}
}

func TestServerReadyzFailsWithReason(t *testing.T) {
	srv, _ := newServer(t, errors.New("kubelet runs the static CPU manager policy"))
	code, body := get(t, srv.Handler(), http.MethodGet, PathReadyz)
	want := "[+]startup-reconcile ok\n[-]kubelet-policy failed: kubelet runs the static CPU manager policy\nreadyz check failed\n"
	if code != http.StatusServiceUnavailable || body != want {
		t.Errorf("GET /readyz = %d %q, want 503 %q", code, body, want)
	}
}

// serveOnLoopback serves srv on a free loopback port; stop ends it and fails the test unless
// Serve returns nil within 10 seconds.
func serveOnLoopback(t *testing.T, srv *Server) (base string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v after cancel, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after cancel")
		}
	}
}

func TestServerServesUntilCancelledAndFetchReadsPins(t *testing.T) {
	srv, view := newServer(t, nil)
	base, stop := serveOnLoopback(t, srv)
	for _, u := range []string{base, base + "/", base + PathPins} {
		got, err := Fetch(context.Background(), http.DefaultClient, u)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(view, got); d != "" {
			t.Errorf("Fetch(%s) differs (-want +got):\n%s", u, d)
		}
	}
	if _, err := Fetch(context.Background(), http.DefaultClient, base+PathHealthz); err == nil || !strings.Contains(err.Error(), "/healthz/pins: 404") {
		t.Errorf("Fetch below another path = %v, want a 404 naming the URL", err)
	}
	stop()
	if _, err := Fetch(context.Background(), http.DefaultClient, base); err == nil {
		t.Error("Fetch succeeded after the server shut down")
	}
}

func TestFetchAndNewRejectBadInput(t *testing.T) {
	for _, u := range []string{"127.0.0.1:9720", "not a url", ""} {
		if _, err := Fetch(context.Background(), http.DefaultClient, u); err == nil || !strings.Contains(err.Error(), "is not a URL") {
			t.Errorf("Fetch(%q) = %v, want a URL error", u, err)
		}
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }))
	defer ts.Close()
	if _, err := Fetch(context.Background(), ts.Client(), ts.URL); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("Fetch of a failing server = %v, want its status", err)
	}
	text := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	defer text.Close()
	if _, err := Fetch(context.Background(), text.Client(), text.URL); err == nil || !strings.Contains(err.Error(), "not a finegrain pins view") {
		t.Errorf("Fetch of a text answer = %v, want a decode error", err)
	}
	if _, err := DecodePins([]byte(`{"node":"x"}`), "file"); err == nil || !strings.Contains(err.Error(), "no source field") {
		t.Errorf("DecodePins without source = %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := New(Config{Address: "9720", Gatherer: prometheus.NewRegistry(), Pins: func() Pins { return Pins{} }, Logger: log}); err == nil || !strings.Contains(err.Error(), "not host:port") {
		t.Errorf("New with a bad address = %v", err)
	}
	if _, err := New(Config{Pins: func() Pins { return Pins{} }, Logger: log}); err == nil {
		t.Error("New without a gatherer succeeded")
	}
}

// The metrics server that a cluster's Prometheus scrapes serves /metrics and nothing that names
// pods or lists processes, and listens until cancelled.
func TestMetricsServerServesOnlyMetrics(t *testing.T) {
	_, s := snapshot(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewState(staticSource{s}, report.Options{WholeCores: true}))
	srv, err := NewMetrics(Config{Address: "127.0.0.1:0", Gatherer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	if code, body := get(t, h, http.MethodGet, PathMetrics); code != http.StatusOK || !strings.Contains(body, "finegrain_") {
		t.Errorf("GET %s = %d %q, want 200 with finegrain's metrics", PathMetrics, code, body)
	}
	for _, path := range []string{PathPins, PathProcesses, PathHealthz, PathReadyz, "/"} {
		if code, _ := get(t, h, http.MethodGet, path); code != http.StatusNotFound {
			t.Errorf("GET %s on the metrics server = %d, want 404", path, code)
		}
	}
	if code, _ := get(t, h, http.MethodPost, PathMetrics); code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s = %d, want 405", PathMetrics, code)
	}

	base, stop := serveOnLoopback(t, srv)
	resp, err := http.Get(base + PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s over TCP = %d", PathMetrics, resp.StatusCode)
	}
	stop()

	for _, cfg := range []Config{
		{Address: "9721", Gatherer: reg, Logger: slog.Default()},
		{Address: ":9721", Logger: slog.Default()},
		{Address: ":9721", Gatherer: reg},
	} {
		if _, err := NewMetrics(cfg); err == nil || !strings.Contains(err.Error(), "metrics server") {
			t.Errorf("NewMetrics(%+v) = %v, want an error naming the metrics server", cfg, err)
		}
	}
}
