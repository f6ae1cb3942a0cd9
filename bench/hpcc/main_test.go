package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
)

// launcherLog is a real launcher's output on this project's development machine (Debian 12,
// hpcc 1.5.0-3, Open MPI 4.1.4): in a directory holding the hpccoutf.txt of an earlier run
// (2 ranks, the input of `hpcc inf -tasks 2 -memory-per-task 16Mi`, N=1440), the second run with
// `hpcc inf -tasks 2 -memory-per-task 16Mi -n 1000` as
// `sh -c 'mpirun --allow-run-as-root --oversubscribe --report-bindings -np 2 hpcc && cat hpccoutf.txt' >launcher.log 2>&1`:
// mpirun's binding report, then the file with both runs, as a launcher prints it.
const launcherLog = "testdata/launcher-2runs.log"

func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTable(t *testing.T) {
	code, out, errOut := runCmd(t, "", "parse", launcherLog)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"testdata/launcher-2runs.log, run 1 of 2 (summary at line 432): 2 MPI processes, HPL N=1440 NB=80 P×Q=1×2",
		"testdata/launcher-2runs.log, run 2 of 2 (summary at line 1016): 2 MPI processes, HPL N=1000 NB=80 P×Q=1×2",
		"  EP-DGEMM      StarDGEMM_Gflops                     3.93971   GFLOP/s per process\n",
		"  G-FFT         MPIFFT_Gflops                        7.9411   GFLOP/s\n",
		"  verdict       Success                              1        every test passed its verification\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestParseOneRank: the local cluster's one-task job has no ring; the run still succeeds and
// the table says why the figure is missing (a real run: internal/hpcc/testdata).
func TestParseOneRank(t *testing.T) {
	code, out, errOut := runCmd(t, "", "parse", "../../internal/hpcc/testdata/hpccoutf-openmpi-np1.txt")
	want := "  G-RandomRing  RandomlyOrderedRingBandwidth_GBytes  n/a      not measured: HPCC runs the ring with 2 or more MPI processes\n"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "1 MPI processes, HPL N=2400 NB=80 P×Q=1×1") {
		t.Errorf("exit %d, stderr %q, table:\n%s", code, errOut, out)
	}
}

func TestParseJSONFromStdin(t *testing.T) {
	code, out, errOut := runCmd(t, readFile(t, launcherLog), "parse", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Source string
		Runs   []struct {
			Run      int
			Line     int
			Problem  string
			Headline map[string]json.RawMessage
			Summary  map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Source != "stdin" || len(rep.Runs) != 2 {
		t.Fatalf("source %q, %d runs; want stdin, 2", rep.Source, len(rep.Runs))
	}
	r := rep.Runs[1]
	var fft hpcc.Figure
	if err := json.Unmarshal(r.Headline["G-FFT"], &fft); err != nil || fft != (hpcc.Figure{Benchmark: "G-FFT", Key: "MPIFFT_Gflops", Value: 7.9411, Unit: "GFLOP/s", Measured: true}) {
		t.Errorf("G-FFT = %+v (%v)", fft, err)
	}
	if string(r.Headline["Success"]) != "true" || r.Problem != "" {
		t.Errorf("Success %s, problem %q", r.Headline["Success"], r.Problem)
	}
	if len(r.Summary) != 148 || r.Summary["HPL_N"] != 1000.0 || r.Summary["VersionRelease"] != "f" {
		t.Errorf("summary of %d keys, HPL_N %v, VersionRelease %v", len(r.Summary), r.Summary["HPL_N"], r.Summary["VersionRelease"])
	}
}

func TestParseFailedRun(t *testing.T) {
	log := readFile(t, launcherLog)
	second := strings.LastIndex(log, "Success=1")
	failed := log[:second] + "Success=0" + log[second+len("Success=1"):]

	code, out, errOut := runCmd(t, failed, "parse")
	if code != 1 || out != "" {
		t.Errorf("exit %d, output %q; want 1 and nothing printed", code, out)
	}
	for _, want := range []string{
		"hpcc parse: stdin: run 2 of 2 (summary at line 1016): Success=0: HPCC reports a test that failed its verification",
		"-allow-failure prints these runs anyway",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	code, out, errOut = runCmd(t, failed, "parse", "-allow-failure")
	if code != 0 || !strings.Contains(out, "  verdict       Success                              0        FAILED: Success=0") {
		t.Errorf("-allow-failure: exit %d, stderr %q, table:\n%s", code, errOut, out)
	}
	missing := strings.Replace(log, "StarSTREAM_Triad=", "StarSTREAM_Triad_=", 1)
	code, out, _ = runCmd(t, missing, "parse", "-allow-failure", "-o", "json")
	if code != 0 || !strings.Contains(out, `"problem": "EP-STREAM: summary section at line 432 has no StarSTREAM_Triad"`) ||
		!strings.Contains(out, `"headline": null`) {
		t.Errorf("missing figure with -allow-failure: exit %d:\n%s", code, out)
	}
}

func TestParseUsageErrors(t *testing.T) {
	log := readFile(t, launcherLog)
	cut := log[:strings.Index(log, hpcc.EndSummary)]
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"no mode", "", nil, 2, "usage: hpcc parse|inf"},
		{"unknown mode", "", []string{"show"}, 2, `unknown mode "show"`},
		{"bad output", "", []string{"parse", "-o", "yaml"}, 2, `-o "yaml": want table or json`},
		{"two files", "", []string{"parse", "a", "b"}, 2, "2 inputs given"},
		{"missing file", "", []string{"parse", "testdata/none.txt"}, 1, "testdata/none.txt: no such file"},
		{"not HPCC", "just a log\n", []string{"parse"}, 1, "hpcc parse: stdin: no HPCC summary section"},
		{"cut log", cut, []string{"parse", "-"}, 1, "stdin: the summary section of line 432 has no"},
	} {
		code, _, errOut := runCmd(t, tt.stdin, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tt.name, code, errOut, tt.code, tt.want)
		}
	}
}

func TestInf(t *testing.T) {
	code, out, errOut := runCmd(t, "", "inf", "-tasks", "16", "-memory-per-task", "1Gi")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	in, err := hpcc.Size(hpcc.DefaultSizing(16, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := in.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	if out != want.String() {
		t.Errorf("inf output:\n%s\nwant:\n%s", out, want.String())
	}
	code, out, _ = runCmd(t, "", "inf", "-tasks", "6", "-n", "3000", "-nb", "100")
	got, err := hpcc.ReadInput(strings.NewReader(out))
	if code != 0 || err != nil || got.N != 3000 || got.NB != 100 || got.Grid != (hpcc.Grid{P: 2, Q: 3}) {
		t.Errorf("forced N: exit %d, read %+v (%v)", code, got, err)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"inf"}, "-tasks is required"},
		{[]string{"inf", "-tasks", "4"}, "memory per task is required"},
		{[]string{"inf", "-tasks", "4", "-memory-per-task", "lots"}, `-memory-per-task "lots"`},
		{[]string{"inf", "-tasks", "4", "-memory-per-task", "1Gi", "-memory-fraction", "2"}, "memory fraction 2"},
		{[]string{"inf", "-tasks", "4", "job.yaml"}, "files are read only with -update"},
		{[]string{"inf", "-update"}, "-update needs the HPCJob files"},
		{[]string{"inf", "-update", "-n", "2000", "x.yaml"}, "not from [-n]"},
	} {
		if code, _, errOut := runCmd(t, "", tt.args...); code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestUsageToStdoutOnHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"help"}, strings.NewReader(""), &out, io.Discard); code != 0 || !strings.Contains(out.String(), "parse  print the headline") {
		t.Errorf("help: exit %d:\n%s", code, out.String())
	}
}
