package measure

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePrometheus answers /api/v1/query as Prometheus does, with answers[query] as data, and
// records the parameters it got.
type fakePrometheus struct {
	mu      sync.Mutex
	answers map[string]string
	got     []string
}

func (p *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/prom/api/v1/query" || r.ParseForm() != nil {
		http.NotFound(w, r)
		return
	}
	q := r.Form.Get("query")
	p.mu.Lock()
	p.got = append(p.got, q+" @ "+r.Form.Get("time"))
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	data, ok := p.answers[q]
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"1:6: parse error: unexpected end of input"}`)
		return
	}
	fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
}

func TestQueryAPI(t *testing.T) {
	prom := &fakePrometheus{answers: map[string]string{
		`histogram_quantile(0.99, sum by (le) (rate(http_seconds_bucket[1m])))`: `{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.0187"]}]}`,
		`scalar(sum(rate(http_requests_total[1m])))`:                            `{"resultType":"scalar","result":[1700000000,"2150.5"]}`,
		`rate(http_requests_total[1m])`:                                         `{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1700000000,"1"]},{"metric":{"pod":"b"},"value":[1700000000,"2"]}]}`,
		`absent_metric`:                                                         `{"resultType":"vector","result":[]}`,
		`http_seconds[1m]`:                                                      `{"resultType":"matrix","result":[]}`,
		`0/0`:                                                                   `{"resultType":"scalar","result":[1700000000,"NaN"]}`,
	}}
	srv := httptest.NewServer(prom)
	defer srv.Close()
	q, err := NewQueryAPI(srv.URL+"/prom", NewClient())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Unix(1700000000, 0)
	for query, want := range map[string]float64{
		`histogram_quantile(0.99, sum by (le) (rate(http_seconds_bucket[1m])))`: 0.0187,
		`scalar(sum(rate(http_requests_total[1m])))`:                            2150.5,
	} {
		if got, err := q.Instant(ctx, query, at); err != nil || got != want {
			t.Errorf("Instant(%s) = %v, %v; want %v", query, got, err, want)
		}
	}
	for query, want := range map[string]string{
		`rate(http_requests_total[1m])`: "the result has 2 series, want one",
		`absent_metric`:                 "the result has 0 series, want one",
		`http_seconds[1m]`:              "the result is a matrix, want a scalar or a vector of one sample",
		`0/0`:                           "the result is NaN, not a measurement",
		`rate(`:                         "parse error",
	} {
		_, err := q.Instant(ctx, query, at)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL+"/prom") {
			t.Errorf("Instant(%s): error %v, want one naming the API and containing %q", query, err, want)
		}
	}
	prom.mu.Lock()
	defer prom.mu.Unlock()
	if len(prom.got) == 0 || prom.got[0] != `histogram_quantile(0.99, sum by (le) (rate(http_seconds_bucket[1m]))) @ 1700000000` &&
		prom.got[0] != `scalar(sum(rate(http_requests_total[1m]))) @ 1700000000` {
		t.Errorf("the API got %q, want the query at the given time", prom.got)
	}
}
