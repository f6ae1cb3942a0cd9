package hpcc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse: Parse never panics; what it accepts has valid keys, marshals to valid JSON with one
// member per field, gives a headline or an error, and reads back the same when written out as
// plain summary sections. The input is bounded by MaxInputBytes in Parse itself; the fuzzer's
// inputs stay far below it.
func FuzzParse(f *testing.F) {
	f.Add(readFixture(f, realOutput))
	f.Add([]byte("x " + BeginSummary + "\nx Success=1\nx " + EndSummary + "\n"))
	f.Add([]byte(BeginSummary + "\r\nStarDGEMM_Gflops=1e3\r\nSuccess=0\r\n" + EndSummary + "\r\n" + BeginSummary + "\nA=\n" + EndSummary))
	f.Add([]byte(banner + "\n" + BeginSummary + "\n\t\n" + EndSummary))
	f.Fuzz(func(t *testing.T, data []byte) {
		sums, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		var text strings.Builder
		for _, s := range sums {
			if len(s.Fields) == 0 || s.Line < 1 {
				t.Fatalf("accepted a summary at line %d with %d fields", s.Line, len(s.Fields))
			}
			for _, fl := range s.Fields {
				if !validKey(fl.Key) || strings.ContainsAny(fl.Value, " \t\r\n") {
					t.Fatalf("accepted field %q=%q", fl.Key, fl.Value)
				}
			}
			b, err := json.Marshal(s)
			if err != nil || !json.Valid(b) {
				t.Fatalf("summary JSON %s: %v", b, err)
			}
			var members map[string]any
			if err := json.Unmarshal(b, &members); err != nil || len(members) != len(s.Fields) {
				t.Fatalf("summary JSON %s has %d members for %d fields (%v)", b, len(members), len(s.Fields), err)
			}
			if h, err := s.Headline(); err == nil {
				if _, err := json.Marshal(h); err != nil {
					t.Fatalf("headline %+v: %v", h, err)
				}
			}
			text.WriteString(BeginSummary + "\n")
			for _, fl := range s.Fields {
				text.WriteString(fl.Key + "=" + fl.Value + "\n")
			}
			text.WriteString(EndSummary + "\n")
		}
		again, err := Parse(strings.NewReader(text.String()))
		if err != nil {
			t.Fatalf("summaries written out do not read back: %v", err)
		}
		for i := range sums {
			if diff := cmp.Diff(sums[i].Fields, again[i].Fields); diff != "" {
				t.Fatalf("summary %d read back differently (-first +again):\n%s", i+1, diff)
			}
		}
	})
}
