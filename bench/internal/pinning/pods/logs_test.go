package pods

import (
	"os"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/worker"
)

func readLog(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The testdata logs are fgworker's real output with stderr merged, as a container log has them
// (fgworker dgemm -np 2 -o log -v; fgworker noise -o log).
func TestParseRunLog(t *testing.T) {
	run, err := parseRunLog(readLog(t, "worker-dgemm.log"))
	if err != nil {
		t.Fatal(err)
	}
	if run.Benchmark != "dgemm" || len(run.Processes) != 2 || !(run.Total.Rate > 0) || !strings.HasPrefix(run.Backend, "gonum") {
		t.Errorf("parsed run %+v", run)
	}
}

func TestParseRunLogErrors(t *testing.T) {
	good := readLog(t, "worker-dgemm.log")
	for name, tc := range map[string]struct {
		log  string
		want string
	}{
		"empty":     {"", "no \"fgworker-result\" line in the log (it ends: (empty))"},
		"crashed":   {"level=ERROR msg=\"fgworker failed\" err=\"rank 0: out of memory\"\n", "it ends: level=ERROR"},
		"twice":     {string(good) + string(good), "2 result lines in the log"},
		"truncated": {worker.LogPrefix + `{"benchmark":"dgemm","unit":"GFLOP/s","processes":[` + "\n", "not an fgworker JSON document"},
		"no ranks":  {worker.LogPrefix + `{"benchmark":"dgemm","unit":"GFLOP/s","processes":[],"total":{}}` + "\n", "has no processes"},
		"unknown":   {worker.LogPrefix + `{"benchmark":"dgemm","colour":"red"}` + "\n", "unknown field"},
	} {
		_, err := parseRunLog([]byte(tc.log))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func TestParseNoiseLog(t *testing.T) {
	r, err := parseNoiseLog(readLog(t, "neighbour.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The last of the running totals counts: the neighbour ran 2.5 s.
	if r.Seconds < 2.5 || r.Threads != 1 || r.Affinity == "" || !(r.GBs > 0) {
		t.Errorf("neighbour totals %+v, want the last line's", r)
	}
	for name, tc := range map[string]struct {
		log  string
		want string
	}{
		"starting": {"time=1 level=INFO msg=\"noise running\"\n", "no \"fgworker-result\" line in the neighbour's log yet"},
		"zero":     {worker.LogPrefix + `{"threads":0,"bytes":0,"seconds":0,"GBs":0}` + "\n", "no threads, time or traffic"},
		"garbage":  {worker.LogPrefix + "{\n", "neighbour totals"},
	} {
		_, err := parseNoiseLog([]byte(tc.log))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// FuzzParseLogs: no container log makes the parsers panic, and whatever they accept is valid.
func FuzzParseLogs(f *testing.F) {
	f.Add(readLog(f, "worker-dgemm.log"))
	f.Add(readLog(f, "neighbour.log"))
	f.Add([]byte(worker.LogPrefix + "{}\n"))
	f.Add([]byte(worker.LogPrefix + `{"threads":1,"bytes":1,"seconds":1,"GBs":1}`))
	f.Fuzz(func(t *testing.T, log []byte) {
		if run, err := parseRunLog(log); err == nil {
			if err := run.Validate(); err != nil {
				t.Errorf("accepted an invalid run: %v", err)
			}
		}
		if r, err := parseNoiseLog(log); err == nil && (r.Threads < 1 || r.Seconds <= 0) {
			t.Errorf("accepted neighbour totals %+v", r)
		}
	})
}
