package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/objective/measure"
)

// The gauge reads back through the loop's own reader after each PUT; bad values are refused.
func TestGauge(t *testing.T) {
	srv := httptest.NewServer(newHandler("web_p99_seconds", 0.04))
	defer srv.Close()
	read := func() float64 {
		t.Helper()
		v, err := measure.ScrapePod(context.Background(), measure.NewClient(), srv.URL+"/metrics", "web_p99_seconds")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	put := func(body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/value", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if v := read(); v != 0.04 {
		t.Errorf("first value %v, want 0.04", v)
	}
	if code := put("0.005\n"); code != http.StatusOK || read() != 0.005 {
		t.Errorf("PUT 0.005: status %d, value %v", code, read())
	}
	for _, bad := range []string{"x", "NaN", "+Inf", "", strings.Repeat("1", 65)} {
		if code := put(bad); code != http.StatusBadRequest {
			t.Errorf("PUT %q: status %d, want 400", bad, code)
		}
	}
	if v := read(); v != 0.005 {
		t.Errorf("after refused PUTs the value is %v, want 0.005", v)
	}
}
