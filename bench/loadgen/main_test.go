package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

func TestParse(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.txt")
	if err := os.WriteFile(file, []byte("1s 10\n2s 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parse([]string{"-url", "http://x", "-trace-file", file}, io.Discard)
	if err != nil || len(o.trace) != 2 || o.trace.Duration().Seconds() != 3 {
		t.Errorf("trace file: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-trace", "1s@1"}, "-url is required"},
		{[]string{"-url", "http://x"}, "exactly one of -trace and -trace-file"},
		{[]string{"-url", "http://x", "-trace", "1s@1", "-trace-file", file}, "exactly one"},
		{[]string{"-url", "http://x", "-trace", "1s"}, "DURATION@RATE"},
		{[]string{"-url", "http://x", "-trace", "1s@1", "-timeout", "0s"}, "must be positive"},
		{[]string{"-url", "http://x", "-trace", "1s@1", "extra"}, "unexpected arguments"},
	} {
		if _, err := parse(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestRun drives an in-process server and reads the JSON report back.
func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	o, err := parse([]string{"-url", srv.URL, "-trace", "1s@20,1s@40"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	if err := run(context.Background(), o, &out, &log); err != nil {
		t.Fatal(err)
	}
	var rep loadgen.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %s: %v", out.String(), err)
	}
	if rep.Summary.Requests != 60 || rep.Summary.Errors != 0 || rep.Seconds[0].Offered != 20 || rep.Seconds[1].Offered != 40 || rep.Seconds[1].OfferedRate != 40 {
		t.Errorf("report %+v", rep)
	}
	if !strings.Contains(log.String(), "60 requests") {
		t.Errorf("summary line %q", log.String())
	}
}
