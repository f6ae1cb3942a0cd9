package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestParse(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil || o.work != 2000 || o.window != 10*time.Second || o.listen != ":8080" {
		t.Errorf("defaults %+v, %v", o, err)
	}
	for _, args := range [][]string{{"-work", "0"}, {"-work", "10000001"}, {"-window", "10ms"}, {"x"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestServeAndMetrics: /work answers the digest of its work; /metrics has the histogram with
// every request and the p99 gauge over the window, which forgets requests older than it.
func TestServeAndMetrics(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s, reg := newService(options{work: 10, window: 10 * time.Second}, c.now)
	srv := httptest.NewServer(s.handler(reg))
	defer srv.Close()
	for i := 0; i < 5; i++ {
		resp, err := http.Get(srv.URL + "/work")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(strings.TrimSpace(string(body))) != 64 {
			t.Fatalf("/work: %s %q", resp.Status, body)
		}
	}
	// Latencies the test chose: 98 fast requests and two slow ones.
	base := c.now()
	for i := 0; i < 98; i++ {
		s.observe(base, base.Add(time.Millisecond))
	}
	s.observe(base, base.Add(400*time.Millisecond))
	s.observe(base, base.Add(900*time.Millisecond))
	m := scrape(t, srv.URL)
	if n := m["cpuservice_request_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 105 {
		t.Errorf("histogram count %d, want 105", n)
	}
	// 105 samples: the nearest-rank p99 is the 104th smallest, the 400 ms one.
	if g := m["cpuservice_request_duration_p99_seconds"].GetMetric()[0].GetGauge().GetValue(); g != 0.4 {
		t.Errorf("p99 gauge %v, want 0.4", g)
	}
	if g := m["cpuservice_requests_in_flight"].GetMetric()[0].GetGauge().GetValue(); g != 0 {
		t.Errorf("in flight %v, want 0", g)
	}
	c.add(11 * time.Second)
	if g := scrape(t, srv.URL)["cpuservice_request_duration_p99_seconds"].GetMetric()[0].GetGauge().GetValue(); g != 0 {
		t.Errorf("p99 gauge %v after the window passed, want 0", g)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}
}

func TestBurnIsDeterministic(t *testing.T) {
	if burn(3) != burn(3) || burn(3) == burn(4) {
		t.Error("burn is not a function of its rounds")
	}
}

// BenchmarkWork is one /work request's CPU cost at the default -work (2000 hashes of 4 KiB),
// without HTTP.
func BenchmarkWork(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		burn(2000)
	}
}
